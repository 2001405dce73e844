"""Benchmark: our twoskip parser against Cyrus's own ``cyr_dbtool <db> twoskip show``.

Data: a Cyrus 3.6 ``mailboxes.db`` of exactly `size` records, written by the real Cyrus tools
(``cyr_dbtool ... twoskip batch``, then ``repack`` as a long-running server's checkpoints do) from
realistic 3.6 content: the RACL marker ``AS\\x1e``, per mailbox an ``N``+dbname key and an
``I``+uniqueid key with dlist values carrying the ACL, and an ``AU``/``AS`` reverse-ACL key per
non-owner grant with ``l`` or ``r`` (the same rule `records.expected_racls` checks). Users have an
INBOX and 2-9 folders, some in other domains, some folders shared or tombstoned, plus shared
folders. Files are cached in ``~/.cache/mqforensics/bench/`` by size and `DATA_VERSION`.

Subjects, each in a fresh process (`measure.run_subject`), on the same copy of that file:

- ``ours``: `twoskip_fast.read`, the reader the audit uses (the C kernel checks the header and
  every record's head and tail CRC into numpy columns and walks level 0 in key order, over a
  read-only mapping of the file), and then a pass over every live key and value, counting
  records and key+value bytes. This is the fair counterpart of ``show``, which walks the same
  list and prints every pair: both parse the whole file into every key/value.
- ``ours-reference``: the same with `twoskip.read`, the pure-Python reference reader (the file
  read whole, one `Record` per record), so the kernel's gain shows in the same run.
- ``ours-load`` (optional): `mqforensics.systems.cyrus.database.read_database`, the audit's
  "parse to a usable form" path: the same read with ``history=True`` (every physical record
  kept, deletes resolved) into a `database.Database`, with the SHA-256 the run manifest
  fingerprints the file by. More work than ``show`` does, so reported separately.
- ``baseline``: ``cyr_dbtool -C <conf> <db> twoskip show`` (C, mmap), its stdout read through a
  pipe in 1 MiB chunks and counted (lines = records, bytes), never printed to a terminal. Without
  a transaction (its default) 3.6.1 locks, unlocks and re-stats the file around every record
  (2 ``fcntl`` and 2 ``newfstatat`` calls per record under strace): what an operator runs.
- ``baseline-txn``: the same with ``-T`` (one read transaction for the whole walk): the speed of
  Cyrus's C reader itself, the stricter comparison.

The parent asserts that every subject saw the same number of records, equal to what the
generator wrote. Both sides read a file that was just copied, so it is in the page cache.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import measure
from mqforensics.services.cache import cache_dir
from mqforensics.systems.cyrus import records, twoskip, twoskip_fast
from mqforensics.systems.cyrus.database import read_database

BENCHMARK = "cyrus_twoskip"
DATA_VERSION = "1"  # bump when the generated content changes: the cache key includes it
TOOLS = Path("/usr/lib/cyrus/bin")
CYR_DBTOOL = TOOLS / "cyr_dbtool"
CYRUS_USER, CYRUS_GROUP = "cyrus", "mail"
VERSION_36 = (3, 6, 1)
ALL_RIGHTS = "lrswipkxtecdan"
ADMINS = ("cyrus",)
CHUNK = 1 << 20
MAILBOXES_PER_TRANSACTION = 1000
FIRST_NAMES = (
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
    "mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "zoe",
)  # fmt: skip
FOLDERS = (
    "Sent", "Drafts", "Trash", "Junk", "Archive", "Archive.2023", "Archive.2024", "Projects",
    "Projects.Q3", "Family", "Receipts", "Newsletters",
)  # fmt: skip
ATOM_SPECIALS = set(' ()"%{*\\')
CONF = """\
# mqforensics bench: cyr_dbtool only reads these; the database path is given on its command line
configdirectory: {d}/config
partition-default: {d}/spool
syslog_prefix: mqf-bench
"""


# --- the generated content -----------------------------------------------------------------


def _astring(text: str) -> str:
    """How Cyrus's dlist printer writes a string: an atom when `imparse_isatom` allows it
    (no byte below 0x1F, none above 0x7E, no specials; US 0x1F is allowed), else quoted."""
    atom = text and text != "NIL" and all(0x1F <= ord(c) < 0x7F for c in text)
    if atom and not ATOM_SPECIALS.intersection(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _acl_dlist(acl: list[tuple[str, str]]) -> str:
    return "%(" + " ".join(f"{_astring(ident)} {rights}" for ident, rights in acl) + ")"


@dataclass
class _Mailbox:
    """One mailbox being generated: its intname, type letters, ACL and dlist fields."""

    intname: str
    mbtype: str
    acl: list[tuple[str, str]]
    uniqueid: str
    serial: int

    def racl_grants(self) -> list[tuple[str, str]]:
        """The ACL entries that make a RACL key (`records.expected_racls`' rule for 3.6)."""
        if "d" in self.mbtype:
            return []
        owner = records.owner_of(self.intname)
        return [
            (ident, rights)
            for ident, rights in self.acl
            if ident != owner and ident not in ADMINS and ("l" in rights or "r" in rights)
        ]

    def drop_grant(self) -> None:
        """Remove the last ACL entry that makes a RACL key."""
        grant = self.racl_grants()[-1]
        self.acl.remove(grant)

    def items(self) -> list[tuple[bytes, bytes]]:
        """Its ``N``, ``I`` and RACL records, as Cyrus 3.6 writes them."""
        dbname = records.intname_to_dbname(self.intname)
        n = self.serial
        common = (
            f"P default V {1_700_000_000 + n} C {n} F {n + 4} M {1_700_000_000 + 37 * n} "
            f"A {_acl_dlist(self.acl)}"
        )
        out = [
            (
                b"N" + dbname.encode(),
                f"%(T {self.mbtype} I {self.uniqueid} {common})".encode(),
            ),
            (
                b"I" + self.uniqueid.encode(),
                f"%(T {self.mbtype} N {_astring(dbname)} {common} H ())".encode(),
            ),
        ]
        shared = records.owner_of(self.intname) is None
        for ident, _ in self.racl_grants():
            out.append((records.racl_key(VERSION_36, shared, ident, self.intname), b""))
        return out


def _mailboxes(rng: random.Random) -> Iterator[_Mailbox]:
    """An endless, deterministic stream of mailboxes in creation order (user by user)."""
    userids: list[str] = []
    serial = 0
    user = 0
    while True:
        user += 1
        local = f"{FIRST_NAMES[user % len(FIRST_NAMES)]}{user}"
        domain = f"d{user % 7}.example.net" if user % 10 == 0 else ""
        userid = f"{local}@{domain}" if domain else local
        prefix = f"{domain}!user.{local}" if domain else f"user.{local}"
        chosen = rng.sample(FOLDERS, rng.randint(2, 7))
        folders = ["", *sorted({*chosen, *(f.split(".")[0] for f in chosen)})]
        for folder in folders:
            serial += 1
            acl = [(userid, ALL_RIGHTS)]
            if folder == "" and rng.random() < 0.3:
                acl.append(("anyone", "p"))  # lets anyone post: no RACL key
            if userids and rng.random() < 0.15:
                acl.append((rng.choice(userids), rng.choice(("lr", "lrs", "lrsw", "lrswi"))))
            if userids and rng.random() < 0.03:
                acl.append((f"-{rng.choice(userids)}", "lr"))  # a negative right
            mbtype = "ed" if folder and rng.random() < 0.01 else "e"
            name = f"{prefix}.{folder}" if folder else prefix
            yield _Mailbox(name, mbtype, acl, str(uuid.UUID(int=rng.getrandbits(128))), serial)
        userids.append(userid)
        if user % 200 == 0:
            serial += 1
            acl = [("anyone", "lrs"), (f"group:team{user}", "lrswi"), ("cyrus", ALL_RIGHTS)]
            acl.append((rng.choice(userids), "lrswipkxte"))
            uid = str(uuid.UUID(int=rng.getrandbits(128)))
            yield _Mailbox(f"shared.team{user // 200}", "e", acl, uid, serial)


def generate_records(size: int) -> Iterator[list[tuple[bytes, bytes]]]:
    """Exactly `size` records (at least 3), one list per write transaction: the RACL marker,
    then each mailbox's ``N``, ``I`` and RACL keys. The last mailboxes lose or gain a grant so
    that the count is exact and the database stays RACL-consistent."""
    if size < 3:
        raise ValueError("a mailboxes.db benchmark needs at least 3 records")
    rng = random.Random(f"mqforensics-bench-cyrus-{DATA_VERSION}")
    yield [(records.RACL_MARKER, b"")]
    remaining = size - 1
    batch: list[tuple[bytes, bytes]] = []
    for mailboxes, box in enumerate(_mailboxes(rng), start=1):
        while 2 + len(box.racl_grants()) > remaining:
            box.drop_grant()
        if remaining - 2 - len(box.racl_grants()) == 1:
            if box.racl_grants():
                box.drop_grant()
            elif "d" not in box.mbtype:
                box.acl.append(("anyone", "lr"))
            else:
                box.mbtype = "e"
                box.acl.append(("anyone", "lr"))
        items = box.items()
        batch.extend(items)
        remaining -= len(items)
        if remaining == 0 or mailboxes % MAILBOXES_PER_TRANSACTION == 0:
            yield batch
            batch = []
        if remaining == 0:
            return


def _literal(data: bytes) -> bytes:
    """A non-synchronising literal (plain ``{n}`` literals crash 3.6.1's batch mode)."""
    return b"{%d+}\r\n" % len(data) + data


def batch_script(transactions: Iterator[list[tuple[bytes, bytes]]]) -> Iterator[bytes]:
    """``cyr_dbtool ... batch`` input: ``BEGIN``, one ``SET`` per record, ``COMMIT``."""
    for pairs in transactions:
        parts = [b"BEGIN\r\n"]
        parts.extend(b"SET " + _literal(k) + b" " + _literal(v) + b"\r\n" for k, v in pairs)
        parts.append(b"COMMIT\r\n")
        yield b"".join(parts)


# --- Cyrus's tools ------------------------------------------------------------------------


def ensure_cyrus() -> None:
    """Install the Debian Cyrus packages the way the test services do, when missing."""
    if CYR_DBTOOL.exists():
        return
    from mqforensics.services import cyrus

    cyrus.ensure_installed()
    if not CYR_DBTOOL.exists():
        raise RuntimeError(f"{CYR_DBTOOL} is missing after installing Cyrus")


def _as_cyrus(argv: list[str]) -> list[str]:
    """`argv` run as the cyrus user when we are root (Cyrus's tools refuse to run as root)."""
    return ["runuser", "-u", CYRUS_USER, "--", *argv] if os.geteuid() == 0 else argv


def _give_to_cyrus(*paths: Path) -> None:
    if os.geteuid() == 0:
        for path in paths:
            shutil.chown(path, CYRUS_USER, CYRUS_GROUP)


def _cyrus_can_reach(directory: Path) -> bool:
    if os.geteuid() != 0:
        return True
    done = subprocess.run(_as_cyrus(["test", "-x", str(directory)]), capture_output=True)
    return done.returncode == 0


def scratch_dir(workdir: Path) -> Path:
    """A fresh directory with an ``imapd.conf`` for Cyrus's tools: under `workdir` when the
    cyrus user can reach it, else in the system temp directory (pytest's are root-only)."""
    workdir.mkdir(parents=True, exist_ok=True)
    base = workdir if _cyrus_can_reach(workdir) else Path(tempfile.gettempdir())
    path = Path(tempfile.mkdtemp(prefix="mqf-bench-cyrus-", dir=base))
    path.chmod(0o755)
    for sub in ("config", "spool"):
        (path / sub).mkdir()
    (path / "imapd.conf").write_text(CONF.format(d=path))
    _give_to_cyrus(path, path / "config", path / "spool", path / "imapd.conf")
    return path


def dbtool_argv(
    scratch: Path, db: Path, *action: str, create: bool = False, transaction: bool = False
) -> list[str]:
    """``cyr_dbtool`` on `db` with the scratch ``imapd.conf``; ``-n`` creates the file, ``-T``
    runs the action in one transaction."""
    flags = (["-n"] if create else []) + (["-T"] if transaction else [])
    tool = [str(CYR_DBTOOL), "-C", str(scratch / "imapd.conf"), *flags, str(db), "twoskip"]
    return _as_cyrus([*tool, *action])


def _check(done: subprocess.CompletedProcess[bytes], what: str) -> None:
    if done.returncode != 0:
        tail = (done.stderr or done.stdout or b"").decode(errors="replace")[-500:]
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {tail}")


# --- the cached database -------------------------------------------------------------------


def cached_db(size: int) -> Path:
    return cache_dir("bench") / f"cyrus-mailboxes-{size}-v{DATA_VERSION}.db"


def _meta_path(db: Path) -> Path:
    return db.with_suffix(".json")


def generate(size: int, workdir: Path) -> dict[str, Any]:
    """Write the `size`-record database with ``cyr_dbtool batch`` (one process reading the
    whole script on stdin) and ``repack`` it, then move it into the cache; its metadata."""
    ensure_cyrus()
    scratch = scratch_dir(workdir)
    try:
        db = scratch / "config" / "mailboxes.db"
        counted = {"records": 0, "bytes": 0}

        def script() -> Iterator[bytes]:
            for transaction in generate_records(size):
                counted["records"] += len(transaction)
                counted["bytes"] += sum(len(k) + len(v) for k, v in transaction)
                yield from batch_script(iter([transaction]))

        started = time.perf_counter()
        errors = scratch / "batch.err"
        with errors.open("wb") as err:
            proc = subprocess.Popen(
                dbtool_argv(scratch, db, "batch", create=True),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            assert proc.stdin is not None
            with proc.stdin:
                for chunk in script():
                    proc.stdin.write(chunk)
            code = proc.wait()
        if code != 0:
            raise RuntimeError(f"cyr_dbtool batch failed (exit {code}): {errors.read_text()}")
        written = time.perf_counter() - started
        _check(subprocess.run(dbtool_argv(scratch, db, "repack"), capture_output=True), "repack")
        with db.open("rb") as handle:
            (in_header,) = struct.unpack_from(">Q", handle.read(twoskip.HEADER_SIZE), 32)
        if in_header != counted["records"]:
            raise RuntimeError(
                f"{db}: header counts {in_header} records, {counted['records']} sent"
            )
        meta = {
            "records": counted["records"],
            "key_value_bytes": counted["bytes"],
            "file_bytes": db.stat().st_size,
            "batch_seconds": round(written, 3),
            "generate_seconds": round(time.perf_counter() - started, 3),
            "data_version": DATA_VERSION,
            "cyrus": _cyrus_version(),
        }
        target = cached_db(size)
        tmp = target.with_name(target.name + ".tmp")
        shutil.copyfile(db, tmp)
        _meta_path(target).write_text(json.dumps(meta, indent=1) + "\n")
        tmp.replace(target)
        return meta
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _cyrus_version() -> str:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "cyrus-imapd"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def ensure_db(size: int, workdir: Path) -> tuple[Path, dict[str, Any], bool]:
    """The cached database of `size` records (generated when missing), its metadata, and
    whether it was generated now."""
    db = cached_db(size)
    if db.exists() and _meta_path(db).exists():
        return db, json.loads(_meta_path(db).read_text()), False
    return db, generate(size, workdir), True


# --- the subjects (children) -----------------------------------------------------------------


def measure_ours(db: Path, *, reference: bool = False) -> dict[str, Any]:
    """`twoskip_fast.read` (or the reference `twoskip.read`) of the file and a pass over every
    live key and value."""
    parsed = twoskip.read(db) if reference else twoskip_fast.read(db)
    count = 0
    size = 0
    for key, value in parsed.items():
        count += 1
        size += len(key) + len(value)
    return {
        "records": count,
        "key_value_bytes": size,
        "problems": len(parsed.problems),
        "kernel": isinstance(parsed, twoskip_fast.FastTwoskipFile),
    }


def measure_load(db: Path) -> dict[str, Any]:
    """`database.read_database`: the history read into a `Database`, as the audit uses it."""
    database = read_database(db)
    items = database.items or []
    return {
        "records": len(items),
        "key_value_bytes": sum(len(k) + len(v) for k, v in items),
        "history_records": len(database.history),
        "problems": len(database.problems),
    }


def measure_baseline(db: Path, scratch: Path, *, transaction: bool = False) -> dict[str, Any]:
    """``cyr_dbtool ... twoskip show`` with its output consumed in 1 MiB chunks and counted."""
    argv = dbtool_argv(scratch, db, "show", transaction=transaction)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    lines = 0
    size = 0
    with proc.stdout:
        while chunk := proc.stdout.read(CHUNK):
            lines += chunk.count(b"\n")
            size += len(chunk)
    stderr = proc.stderr.read() if proc.stderr else b""
    if proc.wait() != 0:
        raise RuntimeError(f"cyr_dbtool show failed: {stderr.decode(errors='replace')[-300:]}")
    return {"records": lines, "show_bytes": size}


# --- the parent ------------------------------------------------------------------------------


def _child(subject: str, db: Path, scratch: Path) -> list[str]:
    argv = ["-m", "bench.cyrus_twoskip", "measure", subject, "--db", str(db)]
    return [*argv, "--scratch", str(scratch)] if subject.startswith("baseline") else argv


SUBJECTS = {
    "ours": ("mqforensics twoskip.read (C kernel, mmap) + every key/value", "ours"),
    "ours-reference": ("mqforensics reference reader (pure Python) + every key/value", "ours"),
    "ours-load": ("mqforensics cyrus read_database (history, Database)", "ours"),
    "baseline": ("cyr_dbtool twoskip show (stdout counted)", "baseline"),
    "baseline-txn": ("cyr_dbtool -T twoskip show (one transaction)", "baseline"),
}


def run(size: int, workdir: Path, *, with_load: bool = True) -> list[measure.Measurement]:
    """Generate (or reuse) the `size`-record database, copy it where the cyrus user can read
    it, and measure each subject on that copy in a fresh process; the generation metadata is
    in each measurement's ``output["data"]``. Fails unless every subject saw every record."""
    db_path, meta, generated = ensure_db(size, workdir)
    scratch = scratch_dir(workdir)
    try:
        copy = scratch / "config" / "mailboxes.db"
        shutil.copyfile(db_path, copy)
        _give_to_cyrus(copy)
        label = f"{size:,} records"
        names = ["ours", "ours-reference", *(["ours-load"] if with_load else [])]
        names += ["baseline", "baseline-txn"]
        results = []
        for name in names:
            subject, role = SUBJECTS[name]
            m = measure.run_subject(BENCHMARK, subject, role, label, _child(name, copy, scratch))
            m.output["data"] = {**meta, "generated_now": generated}
            results.append(m)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    counts = {m.subject: m.output["records"] for m in results}
    if set(counts.values()) != {meta["records"]}:
        raise AssertionError(f"record counts differ: {counts}, generated {meta['records']}")
    pairs = {
        m.subject: m.output["key_value_bytes"] for m in results if "key_value_bytes" in m.output
    }
    if set(pairs.values()) != {meta["key_value_bytes"]}:
        raise AssertionError(
            f"key/value bytes differ: {pairs}, generated {meta['key_value_bytes']}"
        )
    if not results[0].output["kernel"]:
        raise AssertionError("ours ran the reference reader: the twoskip kernel did not load")
    return results


def main(argv: list[str] | None = None) -> int:
    parser, child, parent = measure.command_line("cyrus_twoskip", __doc__, SUBJECTS, "the database")
    child.add_argument("--db", type=Path, required=True)
    child.add_argument("--scratch", type=Path, help="directory with the imapd.conf (baseline)")
    parent.add_argument("--size", type=int, default=1_000_000, help="records")
    parent.add_argument("--no-load", action="store_true", help="skip the read_database subject")
    args = parser.parse_args(argv)
    if args.command == "run":
        return measure.print_all(run(args.size, args.workdir, with_load=not args.no_load))
    if args.subject.startswith("baseline"):
        if args.scratch is None:
            parser.error("the baselines need --scratch (the directory holding imapd.conf)")
        txn = args.subject == "baseline-txn"
        measure.timed(lambda: measure_baseline(args.db, args.scratch, transaction=txn))
    elif args.subject == "ours-load":
        measure.timed(lambda: measure_load(args.db))
    else:
        reference = args.subject == "ours-reference"
        measure.timed(lambda: measure_ours(args.db, reference=reference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
