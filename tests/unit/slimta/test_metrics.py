"""What a slimta operator trends (`systems/slimta/metrics.py`), on the bundled DiskStorage (read
once, at its own instant) against figures counted here from its files, ``mtimes.json`` and what
``truth.json`` and ANOMALIES.md say each role is, and on a handmade store holding only a tmp
file (no live mail)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.api import read
from mqforensics.metrics import AGE_BANDS, age_band, epoch_seconds
from mqforensics.systems.slimta.sample import BUNDLED
from tests.metric_figures import figures_of

pytestmark = pytest.mark.slimta

BANDS = [label for label, _, _ in AGE_BANDS]
DAY = 86_400
TRUTH = json.loads((BUNDLED / "truth.json").read_text())
MTIMES: dict[str, float] = json.loads((BUNDLED / "mtimes.json").read_text())
# ANOMALIES.md: the roles whose envelope does not decode (missing, cut in half, hostile), so
# their age is their newest file's; every other envelope says when slimta received it: when
# the sample was written ("now"), or 30 days before for "old".
NO_ENVELOPE = ("torn_meta", "broken_env", "hostile_env")
# The attempts each role's meta records (None: no meta, or one that does not decode).
ATTEMPTS = {
    "fresh": 0, "old": 0, "bounce": 0, "retried": 2, "partial": 1, "torn_env": None,
    "torn_meta": 0, "corrupt_meta": None, "broken_env": 0, "hostile_env": 0, "hostile_meta": None,
}  # fmt: skip


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory):
    bundled = systems.get("slimta").sample(tmp_path_factory.mktemp("slimta-metrics"))
    frames = read("slimta", options=bundled.options, as_of=bundled.as_of, spark=spark)
    store = Path(bundled.options.disk).parent
    yield store, bundled.as_of, systems.get("slimta").metrics(frames._loaded)
    frames.close()


def _messages(store: Path) -> set[str]:
    """The ids with an ``.env`` or a ``.meta``: one message each."""
    return {p.stem for p in (store / "env").glob("*.env")} | {
        p.stem for p in (store / "meta").glob("*.meta")
    }


def _ages(as_of: str) -> dict[str, float]:
    """Role -> its age at `as_of`."""
    now = epoch_seconds(dt.datetime.fromisoformat(as_of))
    ages = {}
    for role in ATTEMPTS:
        mid = TRUTH["roles"][role]
        if role in NO_ENVELOPE:
            newest = max(t for name, t in MTIMES.items() if Path(name).stem == mid)
            ages[role] = now - newest
        else:
            ages[role] = now - TRUTH["now"] + (30 * DAY if role == "old" else 0)
    return ages


def test_rows_are_every_item_of_the_store(sample):
    store, _, metrics = sample
    tmp = [p for p in (store / "tmp").iterdir() if p.is_file()]
    expected = {(str(store / "env"), ""): len(_messages(store)) + len(tmp)}
    assert figures_of(metrics, "rows") == expected
    assert len(tmp) == 2


def test_live_mails_are_the_messages(sample):
    store, _, metrics = sample
    assert figures_of(metrics, "live_mails") == {(str(store / "env"), ""): len(_messages(store))}
    assert {TRUTH["roles"][r] for r in ATTEMPTS} == _messages(store)


def test_mails_by_age(sample):
    store, as_of, metrics = sample
    expected = {(str(store / "env"), band): 0 for band in BANDS}
    for age in _ages(as_of).values():
        expected[(str(store / "env"), age_band(age))] += 1
    assert figures_of(metrics, "mails_by_age") == expected
    assert [expected[(str(store / "env"), band)] for band in BANDS] == [7, 3, 0, 1]


def test_oldest_live_age_is_the_old_message(sample):
    store, as_of, metrics = sample
    oldest = figures_of(metrics, "oldest_live_age")
    assert oldest == {(str(store / "env"), ""): pytest.approx(_ages(as_of)["old"], abs=1e-3)}


def test_queue_bytes_are_the_files_of_the_messages(sample):
    store, _, metrics = sample
    files = [*(store / "env").glob("*.env"), *(store / "meta").glob("*.meta")]
    assert figures_of(metrics, "queue_bytes") == {
        (str(store / "env"), ""): sum(p.stat().st_size for p in files)
    }


def test_mails_by_attempts(sample):
    store, _, metrics = sample
    buckets = {"0": 0, "1": 0, "2 to 4": 0, "5 or more": 0, "unknown": 0}
    for attempts in ATTEMPTS.values():
        label = (
            "unknown" if attempts is None
            else str(attempts) if attempts < 2
            else "2 to 4" if attempts <= 4
            else "5 or more"
        )  # fmt: skip
        buckets[label] += 1
    assert figures_of(metrics, "mails_by_attempts") == {
        (str(store / "env"), label): n for label, n in buckets.items()
    }


def test_no_other_figure(sample):
    _, _, metrics = sample
    assert {m.metric for m in metrics} == {
        "rows", "live_mails", "mails_by_age", "oldest_live_age", "queue_bytes",
        "mails_by_attempts",
    }  # fmt: skip


# --- handmade ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def only_tmp(spark, tmp_path_factory):
    """A DiskStorage whose only file is an envelope pickle in ``tmp/``: no message."""
    store = tmp_path_factory.mktemp("slimta-only-tmp")
    for name in ("env", "meta", "tmp"):
        (store / name).mkdir()
    name = TRUTH["roles"]["fresh_tmp"]
    shutil.copyfile(BUNDLED / "tmp" / name, store / "tmp" / name)
    frames = read(
        "slimta", disk=store / "env", meta_dir=store / "meta", tmp_dir=store / "tmp",
        as_of="2026-11-22T08:59:41Z", spark=spark,
    )  # fmt: skip
    yield store, systems.get("slimta").metrics(frames._loaded)
    frames.close()


def test_a_store_without_live_mail(only_tmp):
    store, metrics = only_tmp
    env = str(store / "env")
    assert {(m.metric, m.queue, m.item): m.value for m in metrics} == {
        ("rows", env, ""): 1,
        ("live_mails", env, ""): 0,
        **{("mails_by_age", env, band): 0 for band in BANDS},
        ("queue_bytes", env, ""): 0,
        **{("mails_by_attempts", env, b): 0 for b in ("0", "1", "2 to 4", "5 or more", "unknown")},
    }  # no oldest_live_age
