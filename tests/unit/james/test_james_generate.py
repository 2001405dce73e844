"""The James state generator: determinism, James's invariants, and an exact ground truth."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from datasets.james import generate as gen
from mqforensics.systems.james.java_hash import bucket_id, java_string_hashcode, slice_start

ALL = gen.AnomalyCounts(
    unreclaimed_partitions=2,
    cleanup_pending_partitions=2,
    pinned_browse_start=1,
    empty_queue_old_browse_start=1,
    lagging_browse_start=1,
    invisible_mails=3,
    stuck_mails=2,
    orphaned_blobs=3,
    young_orphaned_blobs=2,
    dangling_blob_refs=3,
    bucket_mismatches=2,
    slice_mismatches=3,
    config_violations=2,
)
V3 = dataclasses.replace(ALL, unreclaimed_partitions=0, cleanup_pending_partitions=0,
                         never_cleaned_partitions=3)  # fmt: skip


def spec(**kw) -> gen.GenerationSpec:
    base = {"anomalies": ALL, "normal_mails": 400, "chunk_size": 150}
    base.update(kw)
    return gen.GenerationSpec(**base)


SPECS = {
    "v4-passthrough": spec(),
    "v4-dedup": spec(blob_strategy="deduplication", seed=7),
    "v3-passthrough": spec(table_version="v3", anomalies=V3, seed=3),
    "v3-dedup-4-queues": spec(
        table_version="v3",
        anomalies=V3,
        seed=11,
        blob_strategy="deduplication",
        queues=("spool", "outgoing", "bounces", "relay"),
    ),
    "v4-one-queue": spec(
        queues=("spool",),
        anomalies=gen.AnomalyCounts(
            invisible_mails=2,
            orphaned_blobs=1,
            dangling_blob_refs=1,
            bucket_mismatches=1,
            slice_mismatches=1,
            cleanup_pending_partitions=1,
            unreclaimed_partitions=1,
        ),
    ),
}


@pytest.fixture(scope="module", params=sorted(SPECS))
def state(request) -> gen.GeneratedState:
    return gen.generate(SPECS[request.param])


# -- Java String.hashCode ------------------------------------------------------------------------


def test_java_hashcode_known_values():
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    # "Aa" and "BB" collide in Java
    assert java_string_hashcode("Aa") == java_string_hashcode("BB") == 2112
    # by hand: h = sum(c_i * 31^(n-1-i)) mod 2^32, as a signed int
    name = "Mail1700000000000-AbC"
    by_hand = 0
    for ch in name:
        by_hand = (by_hand * 31 + ord(ch)) % 2**32
    by_hand = by_hand - 2**32 if by_hand >= 2**31 else by_hand
    assert java_string_hashcode(name) == by_hand
    # outside the BMP Java hashes the two UTF-16 surrogates: 0xD83D*31 + 0xDE00
    assert java_string_hashcode("\U0001f600") == 0xD83D * 31 + 0xDE00
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, a known Java curiosity
    assert java_string_hashcode("polygenelubricants") == -(2**31)


def test_bucket_is_math_abs_of_java_remainder():
    # Java: -7 % 4 == -3, Math.abs -> 3 (Python's -7 % 4 would be 1)
    h = java_string_hashcode("polygenelubricants")
    assert bucket_id("polygenelubricants", 3) == abs(-(abs(h) % 3))
    negative = next(f"Mail{i}-x" for i in range(1000) if java_string_hashcode(f"Mail{i}-x") < 0)
    hn = java_string_hashcode(negative)
    assert bucket_id(negative, 7) == abs(hn) % 7
    assert slice_start(1_700_000_123, 900) == 1_700_000_100
    assert slice_start(1_700_000_123, 3600) == 1_699_999_200


def test_vectorised_hash_matches_the_reference():
    names = [f"Mail{1700000000000 + i * 7919}-{'AbCdEfGhIjKlMnOpQrSt'[::-1]}" for i in range(50)]
    codes = np.frombuffer("".join(names).encode(), dtype=np.uint8).reshape(50, 38)
    assert gen._hash_names(codes).tolist() == [java_string_hashcode(n) for n in names]


# -- determinism ---------------------------------------------------------------------------------


def _tree(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_same_seed_same_bytes(tmp_path):
    s = SPECS["v4-passthrough"]
    gen.write_parquet(s, tmp_path / "a")
    gen.write_parquet(s, tmp_path / "b")
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert a == b and len(a) > 10
    gen.write_parquet(dataclasses.replace(s, seed=s.seed + 1), tmp_path / "c")
    assert _tree(tmp_path / "c") != a
    assert gen.generate(s).entries == gen.generate(s).entries


def test_parquet_snapshot_equals_the_in_memory_state(tmp_path):
    import pyarrow.parquet as pq

    s = SPECS["v4-dedup"]
    truth = gen.write_parquet(s, tmp_path)
    state = gen.generate(s)
    assert truth == state.ground_truth
    entries = pq.read_table(tmp_path / "enqueuedmailsv4.parquet").to_pylist()
    assert len(entries) == len(state.entries)
    by_id = {e["enqueueid"]: e for e in state.entries}
    for row in entries:
        expected = by_id[row["enqueueid"]]
        assert row["timerangestart"] == expected["timerangestart"]
        assert row["bucketid"] == expected["bucketid"]
        assert dict(row["attributes"]) == expected["attributes"]
        headers = [(h["_1"], h["_2"], h["_3"]) for h in row["perrecipientspecificheaders"]]
        assert headers == expected["perrecipientspecificheaders"]
    assert pq.read_table(tmp_path / "deletedmailsv2.parquet").num_rows == len(state.deleted)
    files = {p.name for p in (tmp_path / "blobs").iterdir()}
    assert files == set(state.blobs)
    assert (
        tmp_path / "snapshot.json"
    ).read_text().strip() == '{"taken_at": "2026-11-03T12:00:00Z"}'


# -- James invariants of normal rows ---------------------------------------------------------------


def _planted_ids(state) -> set[str]:
    return {row["enqueueid"] for p in state.planted for row in p["rows"]}


def test_normal_rows_follow_james(state):
    spec = state.spec
    history = spec.config_history
    planted = _planted_ids(state)
    deleted = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    for row in state.entries:
        assert re.fullmatch(r"Mail\d{13}-[A-Za-z0-9]{20}", row["name"])
        assert row["table_version"] == spec.table_version
        if row["enqueueid"] in planted:
            continue
        t = int(row["enqueuedtime"].timestamp())
        active = history[0]
        for event in history:
            if event.active_from is None or event.active_from.timestamp() <= t:
                active = event
        trs = int(row["timerangestart"].timestamp())
        assert trs == slice_start(t, active.slice_window_seconds)
        assert row["bucketid"] == bucket_id(row["name"], active.bucket_count)
        consumed = (row["queuename"], row["enqueueid"]) in deleted
        if spec.blob_strategy == "passthrough":
            present = {row["headerblobid"], row["bodyblobid"]} & set(state.blobs)
            assert present == (set() if consumed else {row["headerblobid"], row["bodyblobid"]})
    for key, content in state.blobs.items():
        if re.fullmatch(r"\d+_\d+_.*", key):
            family, _generation, digest = key.split("_", 2)
            assert family == "1"
            assert re.fullmatch(r"[A-Za-z0-9_-]{43}=", digest)
            if key not in {f["subject"] for f in state.ground_truth}:
                import base64

                assert base64.urlsafe_b64decode(digest) == hashlib.sha256(content).digest()
        else:
            assert re.fullmatch(
                r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", key
            )
    headers = {row["headerblobid"] for row in state.entries}
    for key in headers & set(state.blobs):
        assert state.blobs[key].endswith(b"\r\n\r\n")
    event = state.event_store[0]["event"]
    assert event == (
        '{"type":"cassandra-mail-queue-view-configuration","eventId":0,'
        '"aggregateKey":"CassandraMailQueueViewConfiguration","bucketCount":1,'
        '"updateBrowseStartPace":1000,"sliceWindow":3600.000000000}'
    )


# -- an independent oracle of docs/james.md over the whole state ---------------------------------


def oracle(state) -> list[dict]:
    T = int(state.as_of.timestamp())
    events = [gen.parse_event_for_tests(e["event"]) for e in state.event_store
              if e["aggregateid"] == "CassandraMailQueueViewConfiguration"]  # fmt: skip
    windows = {w for w, _ in events}
    counts = {n for _, n in events}
    W = events[-1][0]
    largest = max(windows)
    B = {b["queuename"]: int(b["browsestart"].timestamp()) for b in state.browse_start}
    C = {c["queuename"]: int(c["contentstart"].timestamp()) for c in state.content_start}
    deleted = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    refs = set()
    out = []
    parts: dict = {}
    oldest: dict = {}
    queues = set()

    def f(check, severity, queue, subject):
        out.append({"check": check, "severity": severity, "queue": queue, "subject": subject})

    for row in state.entries:
        q, eid = row["queuename"], row["enqueueid"]
        queues.add(q)
        refs |= {row["headerblobid"], row["bodyblobid"]}
        trs = int(row["timerangestart"].timestamp())
        t_ms = round(row["enqueuedtime"].timestamp() * 1000)
        live = (q, eid) not in deleted
        parts.setdefault((q, trs, row["bucketid"]), []).append(live)
        if live:
            oldest[q] = min(oldest.get(q, trs), trs)
            if trs < B[q]:
                f("invisible_mail", "error", q, eid)
            if t_ms < (T - 86400) * 1000:
                f("stuck_mail", "error", q, eid)
            if {row["headerblobid"], row["bodyblobid"]} - set(state.blobs):
                f("dangling_blob_ref", "error", q, eid)
        if all(row["bucketid"] != bucket_id(row["name"], n) for n in counts):
            f("bucket_mismatch", "warning", q, eid)
        if all(trs % w for w in windows) or not (
            (trs - 60) * 1000 <= t_ms < (trs + largest) * 1000
        ):
            f("slice_mismatch", "warning", q, eid)
    for (q, trs, b), lives in parts.items():
        subject = f"{q}/{gen._iso(trs)}/{b}"
        if q in C and trs < C[q]:
            f("unreclaimed_slice", "warning", q, subject)
        elif q in C and C[q] <= trs < B[q] and not any(lives):
            f("unreclaimed_slice", "info", q, subject)
        elif q not in C and trs < B[q] and not any(lives):
            f("unreclaimed_slice", "warning", q, subject)
    for q in queues:
        if T - B[q] > 7 * 86400 or (q in oldest and B[q] < oldest[q] - W):
            f("stale_browse_start", "warning", q, q)
        f("config_advice", "info", q, q)
    for key in set(state.blobs) - refs:
        if state.blob_last_modified[key].timestamp() < T - 3600:
            f("orphaned_blob", "info", None, key)
    for i in range(1, len(events)):
        (pw, pn), (w, n) = events[i - 1], events[i]
        if w > pw or pw % w or n < pn:
            f("config_violation", "error", None, f"eventid {i}")
    return sorted(out, key=lambda x: (x["check"], x["queue"] or "", x["subject"]))


def test_ground_truth_is_exactly_what_the_rules_find(state):
    assert oracle(state) == state.ground_truth


def test_each_planted_anomaly_is_listed_exactly_once(state):
    truth = Counter(tuple(sorted(f.items(), key=lambda kv: kv[0])) for f in state.ground_truth)
    assert all(n == 1 for n in truth.values()), "a finding is listed twice"
    a = state.spec.anomalies
    kinds = Counter(p["anomaly"] for p in state.planted)
    for name, count in dataclasses.asdict(a).items():
        kind = {
            "unreclaimed_partitions": "unreclaimed_partition",
            "cleanup_pending_partitions": "cleanup_pending",
            "never_cleaned_partitions": "never_cleaned",
            "invisible_mails": "invisible_mail",
            "stuck_mails": "stuck_mail",
            "orphaned_blobs": "orphaned_blob",
            "young_orphaned_blobs": "young_orphaned_blob",
            "dangling_blob_refs": "dangling_blob_ref",
            "bucket_mismatches": "bucket_mismatch",
            "slice_mismatches": "slice_mismatch",
            "config_violations": "config_violation",
        }.get(name, name)
        assert kinds[kind] == count, name
    for p in state.planted:
        if p["anomaly"] == "young_orphaned_blob":
            assert p["primary"] is None
            continue
        assert truth[tuple(sorted(p["primary"].items()))] == 1, p
    young = [p["subject"] for p in state.planted if p["anomaly"] == "young_orphaned_blob"]
    assert len(young) == a.young_orphaned_blobs
    assert not {f["subject"] for f in state.ground_truth} & set(young)
    advice = [f for f in state.ground_truth if f["check"] == "config_advice"]
    assert sorted(f["queue"] for f in advice) == sorted(state.spec.queues)


def test_normal_data_alone_causes_only_config_advice():
    s = gen.generate(gen.GenerationSpec(normal_mails=500, seed=5))
    assert {f["check"] for f in s.ground_truth} == {"config_advice"}
    assert oracle(s) == s.ground_truth


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="V3"):
        gen.generate(spec(table_version="v3"))
    with pytest.raises(ValueError, match="queue-level"):
        gen.generate(spec(queues=("spool", "outgoing")))


def test_vectorised_bucket_ids_equal_java_for_every_kind_of_name():
    import random

    import pyarrow as pa

    from mqforensics.systems.james.java_hash import bucket_ids

    r = random.Random(7)
    alphabet = "abcXYZ0123-_.@é\u4e2d\U0001f600"
    names = [None, "", "a", "polygenelubricants", "x" * 700] + [
        "".join(r.choice(alphabet) for _ in range(r.randint(0, 90))) for _ in range(40_000)
    ]
    # An offset slice, more names than one internal slice, nulls, non-ASCII and surrogate pairs.
    array = pa.array(["skipped", *names]).slice(1)
    for count in (1, 3, 7, 64, 1000):
        got = bucket_ids(array, count).tolist()
        assert got == [-1 if n is None else bucket_id(n, count) for n in names]
    chunked = pa.chunked_array([array.slice(0, 100), array.slice(100)])
    assert bucket_ids(chunked, 7).tolist() == bucket_ids(array, 7).tolist()
    with pytest.raises(ValueError):
        bucket_ids(array, 0)
