"""Benchmark: our Postfix queue reader against Postfix's own ``postqueue -j`` (showq stand-alone).

Data: a ``queue_directory`` of exactly `size` messages in Postfix's own record format. The real
Postfix writes them: a private instance (`mqforensics.services.postfix`, relayhost on a closed
port) receives up to `REAL_MESSAGES` messages over SMTP (smtpd hands them to cleanup, which
writes the queue files), its queue manager tries each once and defers it (the ``defer/`` log
written by the bounce service), then it is stopped. Messages have 1 to 40 recipients (most have
one), bodies of 200 bytes to 64 KiB, a null sender now and then. The queue of `size` is built
from those files: each message is a copy of one real queue file (and of its defer log, if it
is deferred) under a fresh short queue id, in ``deferred`` (hashed, as ``hash_queue_names``
has it), ``active``, ``incoming`` or ``hold`` by `SHARES`: what a queue looks like after its
mail system stopped. A copy's ``Received:`` header still names the queue id of the file it
copies; nothing reads it. Cached in ``~/.cache/mqforensics/bench/`` by size and
`DATA_VERSION`; every run reads hard links to the cached files from a scratch directory the
``postfix`` user can reach (showq drops to it), read once first so that both subjects find
them in the page cache.

Subjects, each in a fresh process (`measure.run_subject`), on the same files:

- ``ours``: `queue_dir.list_queue_dir` and then `files.read_file` of every listed file, what
  the audit's Spark source (`fleet`) runs per file: the bytes read and hashed, every queue
  file's records decoded into its envelope (`records.read_records`,
  `envelope.read_envelope`), every log's entries (`logs.read_log`), one `files.FILES` row each.
- ``baseline``: ``postqueue -c CONF -j`` with the mail system down: postqueue finds no showq
  service and runs ``showq`` itself, which walks the queues, reads every queue file's
  envelope and every deferred message's defer log, and prints one JSON object per message.
  The clock stops when postqueue exits (its output read through a pipe into memory); the
  JSON is parsed after that, for the answers only.

The parent asserts that both saw the same messages per queue, the same pending recipients and
the same total message size (the ``C`` record's content size, showq's ``message_size``), and
that these equal what was generated.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import measure
from mqforensics.services.cache import cache_dir

BENCHMARK = "postfix_queue"
DATA_VERSION = "1"  # bump when the generated content changes: the cache key includes it
SEED = 25
# Messages the real Postfix writes; a larger queue is made of copies of their files.
REAL_MESSAGES = 5_000
# Where the messages of the queue are (deferred is hashed one level deep, Postfix's default).
SHARES = (("deferred", 0.70), ("incoming", 0.12), ("active", 0.08), ("hold", 0.10))
HASHED = ("deferred", "defer")
DOMAINS = ("example.org", "example.com", "example.net", "mail.example.org", "example.edu")
NAMES = (
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
    "mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "zoe",
)  # fmt: skip
SUBJECTS_TEXT = (
    "Quarterly report", "Team offsite", "Invoice", "Lunch?", "Contract draft", "Newsletter",
    "Meeting notes", "Build failed", "Your order has shipped", "Password reset",
)  # fmt: skip
LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation.\n"
)
MAIN_CF = """\
# mqforensics bench: postqueue reads this queue directly (no master runs)
compatibility_level = 3.6
queue_directory = {queue}
data_directory = {lib}
mail_owner = postfix
setgid_group = postdrop
myhostname = mqforensics-postfix.test
mydestination =
alias_maps =
alias_database =
"""


# --- the generated content -------------------------------------------------------------------


def _recipient_count(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.65:
        return 1
    if roll < 0.90:
        return rng.randint(2, 3)
    if roll < 0.98:
        return rng.randint(4, 10)
    return rng.randint(11, 40)


def _address(rng: random.Random, n: int) -> str:
    return f"{rng.choice(NAMES)}.{n}@{rng.choice(DOMAINS)}"


def message_plan(count: int) -> list[tuple[str, list[str], bytes]]:
    """(sender, recipients, message) of the `count` messages the real Postfix receives."""
    rng = random.Random(f"mqforensics-bench-postfix-{DATA_VERSION}-{SEED}")
    plan = []
    for n in range(count):
        sender = "" if rng.random() < 0.05 else _address(rng, n)
        recipients = [_address(rng, n * 64 + i) for i in range(_recipient_count(rng))]
        body_bytes = int(min(65536, 200 * 1.9 ** rng.uniform(0, 9)))
        body = (LOREM * (body_bytes // len(LOREM) + 1))[:body_bytes]
        head = (
            f"From: {sender or 'MAILER-DAEMON@mqforensics-postfix.test'}\r\n"
            f"To: {', '.join(recipients[:3])}\r\n"
            f"Subject: {rng.choice(SUBJECTS_TEXT)} {n}\r\n"
            f"Message-ID: <bench-{n}@mqforensics-postfix.test>\r\n\r\n"
        )
        plan.append((sender, recipients, (head + body.replace("\n", "\r\n")).encode()))
    return plan


def _real_files(workdir: Path, count: int) -> list[tuple[bytes, bytes]]:
    """The queue file and defer log of each of `count` messages the real Postfix wrote."""
    from mqforensics.services import postfix
    from mqforensics.services.harness import Harness

    postfix.ensure_installed()
    root = Path(tempfile.mkdtemp(prefix="mqf-bench-postfix-", dir=_reachable(workdir)))
    root.chmod(0o755)
    harness = Harness(root)
    try:
        info = harness.ensure("postfix")
        ids = [postfix.submit_smtp(info, sender, recipients, message)
               for sender, recipients, message in message_plan(count)]  # fmt: skip
        deferred = postfix.wait_deferred(info, ids, timeout=120 + count * 0.2)
        harness.stop("postfix")
        pairs = []
        for queue_id in sorted(deferred):
            message = postfix.queue_file(info, queue_id, ("deferred",))
            log = postfix.log_file(info, queue_id)
            if message is None or log is None:
                raise RuntimeError(f"{queue_id}: no queue file or defer log")
            pairs.append((message.read_bytes(), log.read_bytes()))
        return pairs
    finally:
        harness.stop_all(["postfix"])
        shutil.rmtree(root, ignore_errors=True)


def _reachable(workdir: Path) -> Path:
    """`workdir` if the postfix user can reach it (showq and master run as postfix), else the
    system temp directory."""
    workdir.mkdir(parents=True, exist_ok=True)
    check = subprocess.run(["runuser", "-u", "postfix", "--", "test", "-x", str(workdir)])
    return workdir if check.returncode == 0 else Path(tempfile.gettempdir())


def _queue_id(n: int) -> str:
    """The `n`th fresh short queue id: 5 hex digits of microseconds, then an inode number."""
    return f"{(n * 7919) % 1_000_000:05X}{0x100000 + n:X}"


def _place(root: Path, queue: str, queue_id: str) -> Path:
    directory = root / queue / queue_id[0] if queue in HASHED else root / queue
    directory.mkdir(parents=True, exist_ok=True)
    return directory / queue_id


def cached_queue(size: int) -> Path:
    return cache_dir("bench") / f"postfix-queue-{size}-v{DATA_VERSION}"


def generate(size: int, workdir: Path) -> dict[str, Any]:
    """Have the real Postfix write min(`size`, `REAL_MESSAGES`) messages, lay out the queue of
    `size` messages from their files in the cache; its metadata."""
    from mqforensics.services import postfix
    from mqforensics.systems.postfix.envelope import read_envelope
    from mqforensics.systems.postfix.records import read_records

    started = time.perf_counter()
    real = _real_files(workdir, min(size, REAL_MESSAGES))
    written = time.perf_counter() - started
    facts = []
    for data, _ in real:
        envelope = read_envelope(read_records(data))
        pending = sum(1 for r in envelope.recipients if r.state == "pending")
        facts.append((pending, envelope.content_size or 0))
    target = cached_queue(size)
    building = target.with_name(target.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    queue_root = building / "queue"
    rng = random.Random(f"mqforensics-bench-postfix-layout-{DATA_VERSION}")
    names = [queue for queue, _ in SHARES]
    weights = [share for _, share in SHARES]
    per_queue: Counter[str] = Counter()
    recipients = content = 0
    now = time.time()
    for n in range(size):
        which = n % len(real)
        data, log = real[which]
        queue = rng.choices(names, weights)[0]
        queue_id = _queue_id(n)
        path = _place(queue_root, queue, queue_id)
        path.write_bytes(data)
        path.chmod(0o700)
        if queue == "deferred":
            retry = now + rng.uniform(60, 3600)
            os.utime(path, (retry, retry))
            log_path = _place(queue_root, "defer", queue_id)
            log_path.write_bytes(log)
            log_path.chmod(0o600)
        per_queue[queue] += 1
        recipients += facts[which][0]
        content += facts[which][1]
    for queue in ("maildrop", "incoming", "active", "deferred", "hold", "defer"):
        (queue_root / queue).mkdir(exist_ok=True)
    meta = {
        "messages": size,
        "per_queue": dict(sorted(per_queue.items())),
        "recipients": recipients,
        "message_size": content,
        "real_messages": len(real),
        "real_seconds": round(written, 3),
        "generate_seconds": round(time.perf_counter() - started, 3),
        "data_version": DATA_VERSION,
        "postfix": postfix.version(),
    }
    (building / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    return meta


def ensure_queue(size: int, workdir: Path) -> tuple[Path, dict[str, Any], bool]:
    """The cached queue of `size` messages (generated when missing), its metadata, and whether
    it was generated now."""
    target = cached_queue(size)
    if (target / "meta.json").exists():
        return target / "queue", json.loads((target / "meta.json").read_text()), False
    return target / "queue", generate(size, workdir), True


def scratch_copy(queue: Path, workdir: Path) -> Path:
    """A scratch directory the postfix user can reach: ``queue/`` (hard links to the cached
    files, owned by postfix), ``lib/`` and ``conf/main.cf`` naming them."""
    scratch = Path(tempfile.mkdtemp(prefix="mqf-bench-postfix-", dir=_reachable(workdir)))
    scratch.chmod(0o755)
    target = scratch / "queue"
    shutil.copytree(queue, target, copy_function=os.link)
    (scratch / "lib").mkdir()
    (scratch / "conf").mkdir()
    conf = MAIN_CF.format(queue=target, lib=scratch / "lib")
    (scratch / "conf" / "main.cf").write_text(conf)
    if os.geteuid() == 0:
        for directory, dirs, files in os.walk(target):
            for name in [*dirs, *files]:
                shutil.chown(os.path.join(directory, name), "postfix", "postfix")
        shutil.chown(scratch / "lib", "postfix", "postfix")
        os.chmod(target, 0o755)
    for directory, _, files in os.walk(target):  # into the page cache, for every subject alike
        for name in files:
            with open(os.path.join(directory, name), "rb") as handle:
                while handle.read(1 << 20):
                    pass
    return scratch


# --- the subjects (children) -----------------------------------------------------------------


def measure_ours(queue: Path) -> dict[str, Any]:
    """`list_queue_dir` and `read_file` of every file, summed like showq's listing."""
    from mqforensics.systems.postfix.files import FILE_COLUMNS, read_file
    from mqforensics.systems.postfix.queue_dir import LISTED_QUEUES, QueueDir, list_queue_dir

    column = {name: i for i, name in enumerate(FILE_COLUMNS)}
    queue_dir = QueueDir(str(queue), str(queue))
    per_queue: Counter[str] = Counter()
    recipients = content = logs = problems = 0
    for listed in list_queue_dir(queue_dir):
        row = read_file(queue_dir, listed)
        if row is None:
            continue
        problems += len(row[column["problems"]] or []) + (row[column["damage"]] is not None)
        if listed.kind != "message":
            logs += 1
            continue
        if listed.queue not in LISTED_QUEUES:
            continue
        per_queue[listed.queue] += 1
        content += row[column["content_size"]] or 0
        recipients += sum(1 for r in row[column["recipients"]] if r[2] == "pending")
    return {
        "messages": sum(per_queue.values()),
        "per_queue": dict(sorted(per_queue.items())),
        "recipients": recipients,
        "message_size": content,
        "logs": logs,
        "problems": problems,
    }


def measure_baseline(scratch: Path) -> None:
    """``postqueue -c CONF -j`` (showq stand-alone), timed to its exit; then its answers."""
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/sbin/postqueue", "-c", str(scratch / "conf"), "-j"], capture_output=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"postqueue -j failed: {done.stderr.decode(errors='replace')[-300:]}")
    per_queue: Counter[str] = Counter()
    recipients = content = 0
    for line in done.stdout.splitlines():
        entry = json.loads(line)
        per_queue[entry["queue_name"]] += 1
        recipients += len(entry["recipients"])
        content += entry["message_size"]
    output = {
        "messages": sum(per_queue.values()),
        "per_queue": dict(sorted(per_queue.items())),
        "recipients": recipients,
        "message_size": content,
        "json_bytes": len(done.stdout),
    }
    measure.report(output, seconds)


# --- the parent ------------------------------------------------------------------------------

SUBJECTS = {
    "ours": ("mqforensics postfix read_file (every file)", "ours"),
    "baseline": ("postqueue -j (showq stand-alone)", "baseline"),
}
ANSWERS = ("messages", "per_queue", "recipients", "message_size")


def run(size: int, workdir: Path) -> list[measure.Measurement]:
    """Generate (or reuse) the queue, link it into a scratch directory and measure each subject
    in a fresh process; the generation metadata is in each measurement's ``output["data"]``.
    Fails unless both saw what was generated."""
    queue, meta, generated = ensure_queue(size, workdir)
    scratch = scratch_copy(queue, workdir)
    try:
        label = f"{size:,} messages"
        results = []
        for name in SUBJECTS:
            subject, role = SUBJECTS[name]
            where = str(scratch / "queue") if name == "ours" else str(scratch)
            argv = ["-m", "bench.postfix_queue", "measure", name, "--path", where]
            m = measure.run_subject(BENCHMARK, subject, role, label, argv)
            m.output["data"] = {**meta, "generated_now": generated}
            results.append(m)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    expected = {key: meta[key] for key in ANSWERS}
    for m in results:
        seen = {key: m.output[key] for key in ANSWERS}
        if seen != expected:
            raise AssertionError(f"{m.subject} saw {seen}, generated {expected}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser, child, parent = measure.command_line("postfix_queue", __doc__, SUBJECTS, "the queue")
    child.add_argument("--path", type=Path, required=True, help="queue (ours) or scratch")
    parent.add_argument("--size", type=int, default=100_000, help="messages")
    args = parser.parse_args(argv)
    if args.command == "run":
        return measure.print_all(run(args.size, args.workdir))
    if args.subject == "baseline":
        measure_baseline(args.path)
    else:
        measure.timed(lambda: measure_ours(args.path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
