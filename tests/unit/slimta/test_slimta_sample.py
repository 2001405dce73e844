"""The bundled slimta sample, written by the real python-slimta 5.0.5, audited with no server
and no slimta: exactly the planted findings, and no pickle ever run."""

from __future__ import annotations

from pathlib import Path

from mqforensics.spark import computed, session
from mqforensics.systems.slimta.checks import AuditOptions, run_checks
from mqforensics.systems.slimta.fleet import Stores, read_items
from mqforensics.systems.slimta.sample import materialize
from tests.integration.slimta.slimta_support import MARKER, disk_expected


def test_the_bundled_sample_gives_exactly_its_planted_findings(tmp_path: Path) -> None:
    MARKER.unlink(missing_ok=True)
    sample = materialize(tmp_path / "sample")
    truth = dict(sample.truth)
    layout = sample.layout
    truth["dirs"] = {"env": layout.env_dir, "meta": layout.meta_dir, "tmp": layout.tmp_dir}
    items = computed(read_items(session("test-slimta-sample"), Stores(disk=layout)))
    rows = run_checks(items, AuditOptions(as_of=sample.as_of)).collect()
    assert {(r["check"], r["severity"], r["subject"]) for r in rows} == disk_expected(truth)
    assert not MARKER.exists()
    # What real slimta did with this store when it was written.
    assert truth["load_error"].startswith("UnpicklingError")
    assert truth["partial_error"].startswith("TypeError")
    counts = {r["kind"]: r["count"] for r in items.groupBy("kind").count().collect()}
    assert counts == {"message": 11, "tmp_file": 2}
