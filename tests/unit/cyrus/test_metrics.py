"""What a Cyrus operator trends (`systems/cyrus/metrics.py`), on the bundled sample (two backends,
read once) against figures counted here from the ``show`` dump's lines (backend1 is the same
database without the two RACL faults planted in backend2, ANOMALIES.md), and on a handmade
one-file dump (no fleet: no ``queue``; no mail queued, so no live mail or age at all)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.api import read
from mqforensics.systems.cyrus.sample import SAMPLE
from tests.metric_figures import figures_of

pytestmark = pytest.mark.cyrus

BACKEND1 = str(SAMPLE / "backend1" / "mailboxes.db")
BACKEND2 = str(SAMPLE / "backend2" / "mailboxes.show")
MARKER = b"AS\x1e"  # the 3.6 RACL marker key
PLANTED_MISSING = b"AU\x1ebob\x1euser\x1falice"  # removed from backend2
PLANTED_STALE = b"AU\x1ezoe\x1eshared\x1fteam"  # added to backend2


@pytest.fixture(scope="module")
def sample(spark):
    frames = read("cyrus", sample=True, spark=spark)
    yield systems.get("cyrus").metrics(frames._loaded)
    frames.close()


def _keys(path: Path) -> dict[bytes, bytes]:
    """The records of a ``show`` dump, one ``key TAB value`` line each."""
    return dict(line.split(b"\t", 1) for line in path.read_bytes().splitlines())


SHOW = _keys(Path(BACKEND2))
# backend1: the database before the plants
ORIGINAL = {k: v for k, v in SHOW.items() if k != PLANTED_STALE} | {PLANTED_MISSING: b""}


def _racl(keys: dict[bytes, bytes]) -> list[bytes]:
    return [k for k in keys if k.startswith((b"AU\x1e", b"AS\x1e")) and k != MARKER]


def _acl_entries(keys: dict[bytes, bytes]) -> int:
    """The identifier/rights pairs of every mailbox record's ``A %(...)``."""
    count = 0
    for key, value in keys.items():
        if key.startswith(b"N"):
            acl = re.search(rb" A %\((.*?)\)", value)
            assert acl is not None
            count += len(re.findall(rb'"[^"]*"|\S+', acl.group(1))) // 2
    return count


def test_rows_are_the_records_of_each_file(sample):
    assert figures_of(sample, "rows") == {(BACKEND1, ""): len(ORIGINAL), (BACKEND2, ""): len(SHOW)}
    assert len(SHOW) == 25


def test_mailboxes_are_the_mailbox_records(sample):
    count = sum(k.startswith(b"N") for k in SHOW)
    assert figures_of(sample, "mailboxes") == {(BACKEND1, ""): count, (BACKEND2, ""): count}
    assert count == 8


def test_acl_entries(sample):
    count = _acl_entries(SHOW)
    assert figures_of(sample, "acl_entries") == {(BACKEND1, ""): count, (BACKEND2, ""): count}
    assert count == 22


def test_racl_entries(sample):
    assert figures_of(sample, "racl_entries") == {
        (BACKEND1, ""): len(_racl(ORIGINAL)),
        (BACKEND2, ""): len(_racl(SHOW)),
    }


def test_racl_drift_is_the_two_planted_faults(sample):
    assert figures_of(sample, "racl_drift") == {
        (BACKEND1, "missing"): 0, (BACKEND1, "stale"): 0, (BACKEND1, "forbidden"): 0,
        (BACKEND2, "missing"): 1, (BACKEND2, "stale"): 1, (BACKEND2, "forbidden"): 0,
    }  # fmt: skip


def test_no_other_figure(sample):
    assert {m.metric for m in sample} == {
        "rows", "mailboxes", "acl_entries", "racl_entries", "racl_drift",
    }  # fmt: skip
    assert all(not m.check for m in sample)


# --- handmade ------------------------------------------------------------------------------------

MAILBOX = b"%(T e I 11111111-1111-4111-8111-111111111111 P default V 1 C 1 F 1 M 1 A %(alice lrswipkxtecdan bob lr))"  # noqa: E501
HANDMADE = [
    (MARKER, b""),
    (b"AU\x1ealice\x1euser\x1falice", b""),  # the owner's own key: Cyrus never writes it
    (b"AU\x1ebob\x1euser\x1falice", b""),  # bob's grant's key
    (b"Nuser\x1falice", MAILBOX),
]


@pytest.fixture(scope="module")
def one_file(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("cyrus-metrics") / "mailboxes.show"
    path.write_bytes(b"".join(k + b"\t" + v + b"\n" for k, v in HANDMADE))
    frames = read("cyrus", inputs=[path], spark=spark)
    yield systems.get("cyrus").metrics(frames._loaded)
    frames.close()


def test_one_file_without_mail_queued(one_file):
    assert {(m.metric, m.queue, m.item): m.value for m in one_file} == {
        ("rows", "", ""): 4,
        ("mailboxes", "", ""): 1,
        ("acl_entries", "", ""): 2,
        ("racl_entries", "", ""): 2,
        ("racl_drift", "", "missing"): 0,
        ("racl_drift", "", "stale"): 0,
        ("racl_drift", "", "forbidden"): 1,
    }  # no live_mails, mails_by_age or oldest_live_age: a mailboxes.db queues no mail
