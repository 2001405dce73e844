"""Write the bundled James sample's broker export (``datasets/james/sample/broker/``) from a real
RabbitMQ, and add its findings to the sample's ground truth.

A private RabbitMQ (the test harness's, Debian's 3.10) gets James's topology for each queue of
the sample and the MailReferenceDTOs of its live mails, as James publishes them, except:

* the stuck mails and one more old mail of ``spool`` are not published (RabbitMQ lost them:
  ``broker_missing_mail``);
* the live mails whose blobs are gone are dead-lettered the real way (``basic.get``, rejected
  without requeue), as James's Dequeuer does with them (``dead_lettered_mail``);
* two orphans are published to ``spool``: an enqueueId with no view row, and the message of a
  consumed mail (``broker_orphan_message``);
* ``spool`` has a consumer (holding one message) when ``queues.json`` is taken, the other queues
  have none (``queue_without_consumer``).

The export is then taken as docs/james.md says (queues.json from the node, the messages from a
copy of its data). Run after ``make_sample`` (which rewrites the sample directory); needs root.

    .venv/bin/python -m datasets.james.make_broker_sample [--sample DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

from datasets.james.broker import export_from_copy, reference

GRACE = dt.timedelta(hours=1)  # the audit's default --broker-grace
STUCK_AFTER = dt.timedelta(days=1)  # the audit's default --stuck-after
LOST_QUEUE = "spool"
ABSENT = str(uuid.uuid5(uuid.NAMESPACE_URL, "mqforensics:james-sample:orphan"))


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _rows(sample: Path, table: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = pq.read_table(sample / f"{table}.parquet").to_pylist()
    return rows


def plant(sample: Path) -> dict[str, Any]:
    """What to publish, per queue and in order, what to dead-letter, and the findings that
    follow, from the sample's tables."""
    as_of = dt.datetime.fromisoformat(
        json.loads((sample / "snapshot.json").read_text())["taken_at"]
    )
    consumed = {(r["queuename"], r["enqueueid"].lower()) for r in _rows(sample, "deletedmailsv2")}
    browse = {r["queuename"]: _utc(r["browsestart"]) for r in _rows(sample, "browsestart")}
    listed = {r["key"] for r in _rows(sample, "blob_inventory")}
    entries = sorted(_rows(sample, "enqueuedmailsv4"), key=lambda r: _utc(r["enqueuedtime"]))
    plan: dict[str, Any] = {"queues": {}, "truth": []}

    def finding(check: str, severity: str, queue: str, subject: str) -> None:
        plan["truth"].append({"check": check, "severity": severity, "queue": queue,
                              "subject": subject})  # fmt: skip

    for queue in sorted(browse):
        dead, rest, lost = [], [], []
        for row in entries:
            key = (row["queuename"], row["enqueueid"].lower())
            if row["queuename"] != queue or key in consumed:
                continue
            visible = _utc(row["timerangestart"]) >= browse[queue]
            old = _utc(row["enqueuedtime"]) < as_of - GRACE
            if visible and old and _utc(row["enqueuedtime"]) < as_of - STUCK_AFTER:
                lost.append(row)
            elif {row["headerblobid"], row["bodyblobid"]} - listed:
                dead.append(row)
            else:
                rest.append(row)
        if queue == LOST_QUEUE:
            extra = next(r for r in rest if _utc(r["timerangestart"]) >= browse[queue]
                         and _utc(r["enqueuedtime"]) < as_of - GRACE)  # fmt: skip
            rest.remove(extra)
            lost.append(extra)
        published = [reference(r) for r in [*dead, *rest]]
        if queue == LOST_QUEUE:
            gone = next(r for r in entries if r["queuename"] == queue
                        and (queue, r["enqueueid"].lower()) in consumed)  # fmt: skip
            published += [reference({**gone, "enqueueid": ABSENT}), reference(gone)]
            finding("broker_orphan_message", "warning", queue, ABSENT)
            finding("broker_orphan_message", "warning", queue, gone["enqueueid"].lower())
        else:
            finding("queue_without_consumer", "error", queue, f"JamesMailQueue-workqueue-{queue}")
        for row in lost:
            finding("broker_missing_mail", "error", queue, row["enqueueid"].lower())
        for row in dead:
            finding("dead_lettered_mail", "error", queue, row["enqueueid"].lower())
        plan["queues"][queue] = {"published": published, "dead": len(dead)}
    return plan


def write(sample: Path) -> list[dict[str, Any]]:
    """The broker export under ``sample/broker``, from a private RabbitMQ; its findings."""
    from mqforensics.services import rabbitmq
    from mqforensics.services.harness import Harness

    plan = plant(sample)
    with tempfile.TemporaryDirectory(prefix="mqf-broker-sample-") as scratch:
        harness = Harness(Path(scratch) / "node")
        try:
            api = rabbitmq.management(harness.ensure("rabbitmq"))
            for queue, planted in plan["queues"].items():
                names = rabbitmq.declare_james_queue(api, queue)
                for body in planted["published"]:
                    rabbitmq.publish(api, names["exchange"], body)
                if planted["dead"]:
                    rabbitmq.dead_letter(api, names["workqueue"], planted["dead"])
            out = sample / "broker"
            export_from_copy(harness, Path(scratch) / "copy", out,
                             held=(f"JamesMailQueue-workqueue-{LOST_QUEUE}", 1))  # fmt: skip
        finally:
            harness.stop_all()
    return list(plan["truth"])


def add_to_truth(sample: Path, found: list[dict[str, Any]]) -> None:
    path = sample / "ground_truth.json"
    truth = json.loads(path.read_text())
    truth["findings"] = sorted(
        truth["findings"] + found, key=lambda f: (f["check"], f["queue"] or "", f["subject"])
    )
    truth["notes"].append(
        "audited with --broker-export broker (a RabbitMQ 3.10 export made by "
        "make_broker_sample.py): the broker findings of ANOMALIES.md"
    )
    path.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    counts: dict[str, int] = {}
    for f in found:
        counts[f["check"]] = counts.get(f["check"], 0) + 1
    listed = ", ".join(f"{n} `{check}`" for check, n in sorted(counts.items()))
    with (sample / "ANOMALIES.md").open("a") as text:
        text.write(
            "\nAudited with `--broker-export broker` (as `mqforensics demo` does): `broker/` "
            "is RabbitMQ 3.10's own export of James's queues for this state (queues.json from "
            "the node, the messages from a copy of its data), made by "
            "`datasets/james/make_broker_sample.py`. RabbitMQ lost the stuck mails and one "
            "more old mail of spool, dead-lettered the mails whose blobs are gone, holds two "
            "orphans in spool (an unknown enqueueId, a consumed mail), and only spool has a "
            f"consumer: {listed}.\n"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, default=Path(__file__).parent / "sample")
    args = parser.parse_args()
    found = write(args.sample)
    add_to_truth(args.sample, found)
    print(f"wrote {args.sample / 'broker'} ({len(found)} expected broker findings)")


if __name__ == "__main__":
    main()
