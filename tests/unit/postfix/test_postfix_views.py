"""The Postfix notebook hooks (``SPEC.views``): qshape's table on the planted queue, exactly, and
qshape.pl's rules for buckets, domains and what counts, on files made for each rule."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pandas as pd
import pytest

from mqforensics import systems
from mqforensics.privacy import pseudonymize_address
from mqforensics.systems.postfix import views
from mqforensics.systems.postfix.files import FILES
from mqforensics.systems.postfix.fleet import read_queue_dirs
from mqforensics.systems.postfix.frames import PostfixFrames
from mqforensics.systems.postfix.queue_dir import QueueDir
from tests.unit.postfix import planted_queue
from tests.unit.postfix.file_rows import message

AS_OF = planted_queue.AS_OF
HEADS = ["T", "5", "10", "20", "40", "80", "160", "320", "640", "1280", "1280+"]


@pytest.fixture(scope="module")
def planted(spark, tmp_path_factory) -> PostfixFrames:
    root = planted_queue.build(tmp_path_factory.mktemp("postfix") / "queue")
    return PostfixFrames(read_queue_dirs(spark, [QueueDir("mx1", str(root))]).localCheckpoint())


def _table(rows: list[list]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=["domain", *HEADS])
    for column in HEADS:
        table[column] = table[column].astype("int64")
    return table


def _row(domain: str, **buckets: int) -> list:
    counts = [buckets.get(f"m{h}".replace("+", "_plus"), 0) for h in HEADS[1:]]
    return [domain, sum(counts), *counts]


def test_the_spec_names_this_module_and_importing_it_imports_no_spark() -> None:
    assert systems.get("postfix").views is views
    code = (
        "import sys; import mqforensics.systems.postfix.spec; "
        "print(sorted(m for m in ('pyspark', 'pandas', 'ipywidgets') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_headings_are_qshapes() -> None:
    assert views.qshape_columns() == HEADS
    assert views.qshape_columns(tick=10, buckets=4, linear=True) == ["T", "10", "20", "30", "30+"]
    assert views.qshape_columns(tick=2.5, buckets=4) == ["T", "2.5", "5", "10", "10+"]
    assert views.qshape_columns(buckets=1) == ["T", "0+"]
    with pytest.raises(ValueError):
        views.qshape_columns(tick=0)


def test_qshape_of_the_planted_queue_by_recipient_domain(planted) -> None:
    # Counted: 9564D9841D2, 9A8B7C6D5E4 (deferred, 96 minutes old), A3B4C5D6E7F (hold, 96
    # minutes), F2B019841E7 (maildrop, 95 minutes, one recipient), F1A2B3C4D5E (deferred, 30 days)
    # and A2B3C4D5E6F (hold, 20 days), two recipients each but the maildrop file. Not counted:
    # the damaged deferred files, the incoming files never marked ready, corrupt/.
    table = views.qshape(planted, as_of=AS_OF)
    pd.testing.assert_frame_equal(
        table,
        _table([
            _row("TOTAL", m160=7, m1280_plus=4),
            _row("example.net", m160=4, m1280_plus=2),
            _row("example.com", m160=3, m1280_plus=2),
        ]),
    )  # fmt: skip
    assert table.attrs == {"by": "recipient", "queues": list(views.QSHAPE_QUEUES),
                           "as_of": AS_OF.isoformat()}  # fmt: skip


def test_qshape_of_the_planted_queue_by_sender_domain_counts_messages(planted) -> None:
    table = views.qshape(planted, as_of=AS_OF, by="sender")
    expected = [_row("TOTAL", m160=4, m1280_plus=2), _row("example.org", m160=4, m1280_plus=2)]
    pd.testing.assert_frame_equal(table, _table(expected))


def test_qshape_of_chosen_queues_and_linear_buckets(planted) -> None:
    table = views.qshape(planted, as_of=AS_OF, queues=("deferred",), tick=60, buckets=4,
                         linear=True)  # fmt: skip
    expected = pd.DataFrame(
        [["TOTAL", 6, 0, 4, 0, 2], ["example.com", 3, 0, 2, 0, 1], ["example.net", 3, 0, 2, 0, 1]],
        columns=["domain", "T", "60", "120", "180", "180+"],
    )
    pd.testing.assert_frame_equal(table, expected)
    empty = views.qshape(planted, as_of=AS_OF, queues=("active",))
    pd.testing.assert_frame_equal(empty, _table([_row("TOTAL")]))
    assert views.qshape(planted, as_of=AS_OF, hosts=["mx2"])["T"].tolist() == [0]


MINUTE = dt.timedelta(minutes=1)


@pytest.fixture(scope="module")
def made(spark) -> PostfixFrames:
    files = [
        # Bucket edges, in whole seconds: [0, 5) [5, 10) [10, 20) ... [1280, ...) minutes.
        message("deferred", "A0001", "a@Example.ORG", [("x@one.example", "pending")],
              5 * MINUTE - dt.timedelta(seconds=1)),
        message("deferred", "A0002", "a@example.org", [("x@one.example", "pending")], 5 * MINUTE),
        message("deferred", "A0003", "a@example.org", [("x@one.example", "pending")], 20 * MINUTE),
        message("deferred", "A0004", "a@example.org", [("x@one.example", "pending")],
              1280 * MINUTE - dt.timedelta(seconds=1)),
        message("deferred", "A0005", "a@example.org", [("x@one.example", "pending")],
              1280 * MINUTE),
        # An arrival in the future (a clock step) is in the first bucket, as qshape puts it.
        message("active", "A0006", "a@example.org", [("x@one.example", "pending")], -MINUTE),
        # A bounce: the null sender; one recipient done, one pending with dots to trim.
        message("hold", "B0001", "", [("Y@Sub..Two.EXAMPLE.", "pending"),
                                    ("z@two.example", "done")], 30 * MINUTE),
        # A bare local part (a submission without a domain) and an empty recipient.
        message("maildrop", "C0001", "root", [("postmaster", "pending"), ("", "pending")],
              30 * MINUTE),
        # Not counted: nothing pending; not ready; damaged; no sender record; in corrupt/.
        message("deferred", "D0001", "a@example.org", [("x@one.example", "done")], MINUTE),
        message("incoming", "D0002", "a@example.org", [("x@one.example", "pending")], MINUTE,
              mode=0o600, complete=False),
        message("deferred", "D0003", "a@example.org", [("x@one.example", "pending")], MINUTE,
              complete=False),
        message("deferred", "D0004", None, [("x@one.example", "pending")], MINUTE),
        message("corrupt", "D0005", "a@example.org", [("x@one.example", "pending")], MINUTE),
        # Forced to expire (postsuper -e, mode 0710): still queued, still counted.
        message("deferred", "E0001", "a@example.org", [("x@one.example", "pending")], 40 * MINUTE,
              mode=0o710, host="mx2"),
    ]  # fmt: skip
    return PostfixFrames(spark.createDataFrame(files, FILES))


def test_qshape_buckets_domains_and_what_counts_by_recipient(made) -> None:
    table = views.qshape(made, as_of=AS_OF)
    bare = pseudonymize_address("postmaster")
    pd.testing.assert_frame_equal(
        table,
        _table([
            _row("TOTAL", m5=2, m10=1, m40=4, m80=1, m1280=1, m1280_plus=1),
            _row("one.example", m5=2, m10=1, m40=1, m80=1, m1280=1, m1280_plus=1),
            _row(bare, m40=1),
            _row("MAILER-DAEMON", m40=1),
            _row("sub.two.example", m40=1),
        ]),
    )  # fmt: skip
    revealed = views.qshape(made, as_of=AS_OF, reveal=True)
    assert revealed["domain"].tolist() == [
        "TOTAL", "one.example", "postmaster", "MAILER-DAEMON", "sub.two.example",
    ]  # fmt: skip
    only = views.qshape(made, as_of=AS_OF, hosts=["mx2"])
    assert only[["domain", "T", "80"]].values.tolist() == [["TOTAL", 1, 1], ["one.example", 1, 1]]


def test_qshape_by_sender_counts_each_message_once(made) -> None:
    table = views.qshape(made, as_of=AS_OF, by="sender", reveal=True)
    pd.testing.assert_frame_equal(
        table,
        _table([
            _row("TOTAL", m5=2, m10=1, m40=3, m80=1, m1280=1, m1280_plus=1),
            _row("example.org", m5=2, m10=1, m40=1, m80=1, m1280=1, m1280_plus=1),
            _row("root", m40=1),
            _row("MAILER-DAEMON", m40=1),
        ]),
    )  # fmt: skip
    with pytest.raises(ValueError):
        views.qshape(made, as_of=AS_OF, by="size")


def test_queued_messages_lists_every_queue_file_in_queue_order(planted) -> None:
    table = views.queued_messages(planted)
    assert list(table.columns) == views.MESSAGE_COLUMNS
    assert list(zip(table["queue"], table["queue_id"], strict=True)) == [
        ("maildrop", "F2B019841E7"), ("incoming", "D1E2F3A4B5C"), ("incoming", "D2E3F4A5B6C"),
        ("deferred", "F1A2B3C4D5E"), ("deferred", "9564D9841D2"), ("deferred", "9A8B7C6D5E4"),
        ("deferred", "A1B2C3D4E5F"), ("deferred", "B1C2D3E4F50"), ("hold", "A2B3C4D5E6F"),
        ("hold", "A3B4C5D6E7F"), ("corrupt", "E1F2A3B4C5D"),
    ]  # fmt: skip
    first = table.iloc[3]
    assert (first["sender"], first["pending"], first["size"]) == (
        "alice@example.org", "bob@example.net, carol@example.com", len(
            planted_queue.backdated(planted_queue.REAL_DEFERRED, 30)),
    )  # fmt: skip
    assert first["arrival"] == pd.Timestamp(planted_queue.ARRIVAL - dt.timedelta(days=30))
    # The damaged file's sender record never read; the truncated one's recipients neither.
    assert pd.isna(table.iloc[7]["sender"]) and pd.isna(table.iloc[6]["pending"])
    held = views.queued_messages(planted, queues=["hold"])
    assert held["queue_id"].tolist() == ["A2B3C4D5E6F", "A3B4C5D6E7F"]


def test_queued_messages_shows_the_null_sender(made) -> None:
    table = views.queued_messages(made, queues=["hold"])
    assert table[["sender", "pending"]].values.tolist() == [["<>", "Y@Sub..Two.EXAMPLE."]]


def test_nothing_queued_is_an_empty_table(made) -> None:
    assert views.queued_messages(made, queues=["saved"]).empty
