"""Benchmark: the content search of James's queued mails (`systems.james.content`) against a raw
read of the same blobs, in blobs per second.

Data: the bundled James sample's live mails (header blob + body blob each, as James wrote them
into ``datasets/james/sample/blobs``) copied under fresh passthrough ids until `mails` mails
(2 x `mails` blobs) sit in one local directory, a copy of a bucket as ``--blob-dir`` reads it;
one mail in `PLANTED_EVERY` has the searched subject added to its header (``Reply-To``) and body,
and one in `COMPRESSED_EVERY` has its body zstd-compressed, as James's compression would leave
it. Cached in ``~/.cache/mqforensics/bench/`` by size and `DATA_VERSION`.

Subjects, each in a fresh process (`measure.run_subject`), on the same files (in the page cache
for every subject alike):

- ``headers``: `content.search_content` of every mail at depth ``headers`` (what each Spark
  task of the audit runs per view row): the header blob read, decoded, parsed and searched;
- ``full``: the same at depth ``full``: header and body blobs, MIME parts decoded and searched;
- ``raw-headers`` / ``raw``: a raw read of the same header blobs / of every blob, counting bytes.

The parent asserts that the searches found the subject in exactly the mails it was planted in
(headers: the header; full: header and body) and that each search read as many bytes as its
raw read.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench import measure
from mqforensics.services.cache import cache_dir
from mqforensics.systems.james.content import BlobReader

BENCHMARK = "james_content"
DATA_VERSION = "1"
SEED = 48
PLANTED_EVERY = 50
COMPRESSED_EVERY = 10
SUBJECT = "dora@example.net"
KEY = b"bench-james-content-key-32-bytes"
SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "james" / "sample"
SUBJECTS = {
    "headers": ("mqforensics james content search, depth headers", "ours"),
    "full": ("mqforensics james content search, depth full", "ours"),
    "raw-headers": ("raw read of the header blobs", "baseline"),
    "raw": ("raw read of every blob", "baseline"),
}


def _sample_mails() -> list[tuple[bytes, bytes]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(SAMPLE / "enqueuedmailsv4.parquet").to_pylist()
    blobs = SAMPLE / "blobs"
    mails = []
    for row in sorted(rows, key=lambda r: r["enqueueid"]):
        head, body = blobs / str(row["headerblobid"]), blobs / str(row["bodyblobid"])
        if head.is_file() and body.is_file():
            mails.append((head.read_bytes(), body.read_bytes()))
    return mails


def write_blobs(directory: Path, mails: int) -> dict[str, Any]:
    """`mails` mails' blobs in `directory` and their ids in ``mails.json`` beside it."""
    import pyarrow as pa

    directory.mkdir(parents=True)
    rng = random.Random(SEED)
    sample = _sample_mails()
    ids = []
    planted = []
    blob_bytes = header_bytes = 0
    for number in range(mails):
        head, body = sample[number % len(sample)]
        if number % PLANTED_EVERY == 0:
            head = head.replace(b"\r\n\r\n", f"\r\nReply-To: {SUBJECT}\r\n\r\n".encode(), 1)
            body = body + f"\r\nWrite to {SUBJECT}.\r\n".encode()
            planted.append(number)
        if number % COMPRESSED_EVERY == 1:
            body = pa.Codec("zstd").compress(body, asbytes=True)
        pair = (str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                str(uuid.UUID(int=rng.getrandbits(128), version=4)))  # fmt: skip
        (directory / pair[0]).write_bytes(head)
        (directory / pair[1]).write_bytes(body)
        ids.append(pair)
        blob_bytes += len(head) + len(body)
        header_bytes += len(head)
    meta = {"mails": mails, "blobs": 2 * mails, "blob_bytes": blob_bytes,
            "header_bytes": header_bytes, "planted": planted}  # fmt: skip
    (directory.parent / "mails.json").write_text(json.dumps({"ids": ids, **meta}))
    return meta


def ensure_blobs(mails: int) -> tuple[Path, dict[str, Any], bool]:
    root = cache_dir("bench") / f"james_content-{mails}-v{DATA_VERSION}"
    blobs = root / "blobs"
    if (root / "mails.json").exists():
        meta = json.loads((root / "mails.json").read_text())
        meta.pop("ids")
        return blobs, meta, False
    shutil.rmtree(root, ignore_errors=True)
    building = Path(tempfile.mkdtemp(prefix="james_content-", dir=cache_dir("bench")))
    meta = write_blobs(building / "blobs", mails)
    building.rename(root)
    return blobs, meta, True


def _ids(blobs: Path) -> list[tuple[str, str]]:
    return [tuple(pair) for pair in json.loads((blobs.parent / "mails.json").read_text())["ids"]]


def _search(blobs: Path, depth: str) -> dict[str, Any]:
    from mqforensics.content_search import Searched
    from mqforensics.retention.policy import subject_hash
    from mqforensics.subjects import keyed
    from mqforensics.systems.james.content import BlobContent, search_content

    subject = keyed(subject_hash(SUBJECT), KEY)
    searched = Searched(KEY, frozenset({subject}), frozenset({subject} if depth == "full" else ()))
    reader = BlobContent.directory(blobs).reader()
    counting = _Counting(reader)
    found: dict[str, list[int]] = {}
    unreadable = 0
    for number, (head, body) in enumerate(_ids(blobs)):
        result = search_content(counting, head, body, searched)
        for hit in result.hits:
            found.setdefault(hit.where, []).append(number)
        unreadable += len(result.unreadable)
    return {"blobs": counting.blobs, "bytes": counting.bytes, "found": found,
            "unreadable": unreadable}  # fmt: skip


class _Counting(BlobReader):
    """A blob reader that counts what it read (the stored bytes)."""

    def __init__(self, reader: BlobReader) -> None:
        self.reader, self.blobs, self.bytes = reader, 0, 0

    def read(self, key: str) -> tuple[bytes, str | None]:
        data, encoding = self.reader.read(key)
        self.blobs += 1
        self.bytes += len(data)
        return data, encoding


def _raw(blobs: Path, headers_only: bool) -> dict[str, Any]:
    count = total = 0
    for head, body in _ids(blobs):
        for key in (head,) if headers_only else (head, body):
            with open(os.path.join(blobs, key), "rb") as handle:
                total += len(handle.read())
            count += 1
    return {"blobs": count, "bytes": total}


WORK = {
    "headers": lambda blobs: _search(blobs, "headers"),
    "full": lambda blobs: _search(blobs, "full"),
    "raw-headers": lambda blobs: _raw(blobs, True),
    "raw": lambda blobs: _raw(blobs, False),
}


def run(mails: int, workdir: Path) -> list[measure.Measurement]:
    """Generate (or reuse) the blobs and measure each subject in a fresh process; fails unless
    each search found the subject exactly where it was planted and read its raw read's bytes."""
    workdir.mkdir(parents=True, exist_ok=True)
    blobs, meta, generated = ensure_blobs(mails)
    label = f"{meta['mails']:,} mails, {meta['blobs']:,} blobs"
    results = []
    for name in SUBJECTS:
        subject, role = SUBJECTS[name]
        argv = ["-m", "bench.james_content", "measure", name, "--blobs", str(blobs)]
        m = measure.run_subject(BENCHMARK, subject, role, label, argv)
        data = {k: v for k, v in meta.items() if k != "planted"}
        m.output["data"] = {**data, "generated_now": generated}
        m.output["blobs_per_second"] = round(m.output["blobs"] / m.seconds) if m.seconds else None
        results.append(m)
    by = {name: m.output for name, m in zip(SUBJECTS, results, strict=True)}
    planted = meta["planted"]
    if by["headers"]["found"] != {"header:reply-to": planted}:
        raise AssertionError(f"headers search found {by['headers']['found']}")
    if by["full"]["found"] != {"header:reply-to": planted, "body": planted}:
        raise AssertionError(f"full search found {by['full']['found']}")
    for ours, raw in (("headers", "raw-headers"), ("full", "raw")):
        if (by[ours]["blobs"], by[ours]["bytes"]) != (by[raw]["blobs"], by[raw]["bytes"]):
            raise AssertionError(f"{ours} read {by[ours]['bytes']} bytes, {raw} {by[raw]['bytes']}")
    for m in results:  # the positions proved equal above: keep the counts only
        if "found" in m.output:
            m.output["found"] = {where: len(rows) for where, rows in m.output["found"].items()}
    return results


def main(argv: list[str] | None = None) -> int:
    parser, child, parent = measure.command_line("james_content", __doc__, SUBJECTS, "the blobs")
    child.add_argument("--blobs", type=Path, required=True)
    parent.add_argument("--mails", type=int, default=5_000)
    args = parser.parse_args(argv)
    if args.command == "run":
        return measure.print_all(run(args.mails, args.workdir))
    if args.subject in ("headers", "full"):  # imported before the clock
        import mqforensics.systems.james.content  # noqa: F401
    work = WORK[args.subject]
    measure.timed(lambda: work(args.blobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
