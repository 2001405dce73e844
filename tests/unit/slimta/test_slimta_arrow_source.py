"""The ``slimta_items`` source yields Arrow record batches; over the bundled sample, a store of
the real python-slimta pickles (tests/data/slimta/pickles) with torn and hostile entries, and the
sample under names that are not valid UTF-8, it gives exactly what its tuple rows
(`items.Item.as_row`) gave: the same Arrow columns as Spark's own conversion of those tuples,
and the same DataFrame rows."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mqforensics.filenames import shown
from mqforensics.sources.arrow_rows import ArrowRows
from mqforensics.systems.slimta import fleet
from mqforensics.systems.slimta.disk import DiskLayout
from mqforensics.systems.slimta.items import ITEMS
from mqforensics.systems.slimta.sample import materialize
from tests.unit.arrow_sources import assert_same_table, sorted_rows, spark_table, struct, table

PICKLES = Path(__file__).resolve().parents[2] / "data" / "slimta" / "pickles"
ENVELOPES = sorted(p for p in PICKLES.glob("*.pickle") if p.name.startswith(("envelope", "bounce")))
# Not a pickle; a pickle that would run a command if loaded (never loaded: `safe_pickle`).
TORN = b"\x80\x04\x95\xff"
HOSTILE = b"cos\nsystem\n(S'echo owned'\ntR."


def _pickle_store(root: Path) -> DiskLayout:
    """Every real envelope and bounce pickle as a disk-store message (meta new or delivered),
    plus a torn and a hostile envelope, a message with no meta and a meta with no message."""
    for name in ("env", "meta", "tmp"):
        (root / name).mkdir(parents=True)
    metas = [
        (PICKLES / "disk_new.meta").read_bytes(),
        (PICKLES / "disk_delivered.meta").read_bytes(),
    ]
    envelopes = [p.read_bytes() for p in ENVELOPES] + [(PICKLES / "disk.env").read_bytes()]
    envelopes += [TORN, HOSTILE]
    for n, data in enumerate(envelopes):
        message = f"{n:032x}"
        (root / "env" / f"{message}.env").write_bytes(data)
        if n % 5 != 4:
            (root / "meta" / f"{message}.meta").write_bytes(metas[n % 2])
    (root / "meta" / f"{'f' * 32}.meta").write_bytes(metas[0])
    (root / "tmp" / "tmpabcd1234").write_bytes(b"half-written")
    return DiskLayout.checked(root / "env", root / "meta", root / "tmp")


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> list[DiskLayout]:
    root = tmp_path_factory.mktemp("stores")
    sample = materialize(root / "sample").layout
    odd = os.path.join(os.fsencode(root), b"odd-\xfe")
    shutil.copytree(os.fsencode(root / "sample"), odd)
    env = os.path.join(odd, b"env")
    first = sorted(n for n in os.listdir(env) if n.endswith(b".env"))[0]
    os.rename(os.path.join(env, first), os.path.join(env, first[:4] + b"\xff" + first[4:]))
    odd_layout = DiskLayout.checked(
        *(os.fsdecode(os.path.join(odd, d)) for d in (b"env", b"meta", b"tmp"))
    )
    return [sample, _pickle_store(root / "pickles"), odd_layout]


def _reader(spark, layout: DiskLayout) -> fleet.SlimtaItemsReader:
    options = fleet._options(fleet.Stores(disk=layout))[0]
    return fleet.SlimtaItemsReader(options, struct(spark, ITEMS))


def test_the_corpus_holds_decoded_refused_and_odd_items(layouts, spark) -> None:
    rows = []
    for layout in layouts:
        reader = _reader(spark, layout)
        rows += [i.as_row() for p in reader.partitions() for i in reader.items(p)]
    states = {r[8] for r in rows}
    assert {"ok", "missing"} <= states and len(states) > 2
    assert any("\\xff" in (r[3] or "") for r in rows)
    assert any(r[13] for r in rows) and any(r[16] for r in rows)  # recipients, arrival
    assert shown(layouts[2].env_dir).endswith("\\xfe/env")


def test_the_batches_are_sparks_conversion_of_the_rows(layouts, spark) -> None:
    schema = struct(spark, ITEMS)
    for layout in layouts:
        reader = _reader(spark, layout)
        for part in reader.partitions():
            want = spark_table((i.as_row() for i in reader.items(part)), schema)
            assert want.num_rows
            assert_same_table(table(reader.read(part), schema), want)
            rows = (i.as_row() for i in reader.items(part))
            small = list(ArrowRows(schema).batches(rows, size=4))
            assert all(b.num_rows <= 4 for b in small)
            assert_same_table(table(small, schema), want)
        assert list(reader.read(None)) == []  # Spark's one empty partition


def test_the_source_reads_what_the_tuple_rows_held(layouts, spark) -> None:
    for layout in layouts:
        reader = _reader(spark, layout)
        frame = fleet.read_items(spark, fleet.Stores(disk=layout))
        old_rows = [i.as_row() for p in reader.partitions() for i in reader.items(p)]
        old = spark.createDataFrame(old_rows, ITEMS)
        assert frame.schema == old.schema
        assert sorted_rows(frame.collect()) == sorted_rows(old.collect())
