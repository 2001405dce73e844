"""Make the bundled Postfix sample: a queue written by the real Postfix, then damaged on purpose.

    sudo .venv/bin/python -m datasets.postfix.make_sample

(root: the harness's private Postfix runs as root.) It starts a throwaway instance with
`mqforensics.services.postfix` (Debian's Postfix 3.7, relayhost on a closed loopback port, so
every message defers), submits nine messages with fictional example.org/.com/.net addresses
(eight through sendmail, one of them with the null sender, and one through smtpd), waits until
the queue manager has deferred them all and puts two on hold with ``postsuper -h``. Then, with
Postfix still running, it saves ``postqueue -j`` (``postqueue.jsonl``), ``postcat -o -q ID`` of
every message (``postcat/ID.txt``) and ``postconf -n`` (``postconf.txt``); stops Postfix; and
copies the message queues and the defer/bounce/trace logs to ``sample/queue/`` (hashed
subdirectories kept). Only then are the anomalies planted, in the copy (``planted.json``,
``ANOMALIES.md``). ``files.json`` keeps every file's mode and mtime (git keeps neither),
``as_of.txt`` the instant to judge the sample at (ten minutes after the last message arrived).

Record layout (src/global/record.c ``rec_put``): a type byte, the data length in 7-bit groups,
least significant first, 0x80 set while more length bytes follow, then the data. Offsets come
from ``postcat -o``, which prints each record's offset.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mqforensics.services import postfix
from mqforensics.services.harness import Harness

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample"
QUEUE = SAMPLE / "queue"
SCRATCH = Path(tempfile.gettempdir()) / "mqforensics-postfix-sample"
DAY = 86400
AS_OF_AFTER = 600  # seconds after the last arrival

# (role, sender, fullname, recipients, subject, how). Fictional people at the example domains.
MESSAGES = [
    ("truncated", "alice@example.org", "Alice Example", ["bob@example.net"], "Quarterly report",
     "sendmail"),
    ("clean_three_rcpt", "carol@example.com", "Carol Example",
     ["dave@example.org", "erin@example.net", "frank@example.com"], "Team offsite", "sendmail"),
    ("clean_bounce", "", "Mail Delivery System", ["grace@example.org"],
     "Undelivered Mail Returned to Sender", "sendmail"),
    ("flipped_length", "heidi@example.net", None, ["ivan@example.com"], "Invoice 2211", "smtp"),
    ("orphan_log", "judy@example.org", "Judy Example", ["mallory@example.net"], "Lunch?",
     "sendmail"),
    ("old_hold", "niaj@example.com", "Niaj Example", ["olivia@example.org"], "Contract draft",
     "sendmail"),
    ("clean_hold", "peggy@example.net", "Peggy Example",
     ["rupert@example.com", "sybil@example.org"], "Newsletter", "sendmail"),
    ("expired", "trent@example.org", "Trent Example", ["victor@example.net"], "Old news",
     "sendmail"),
    ("deferred_without_log", "walter@example.com", "Walter Example", ["xavier@example.net"],
     "Meeting notes", "sendmail"),
]  # fmt: skip
HELD = ("old_hold", "clean_hold")


def _message(number: int, sender: str, recipients: list[str], subject: str, crlf: bool) -> bytes:
    """A plain message; nothing in it names its role in the sample."""
    author = sender or "MAILER-DAEMON@mqforensics-postfix.test"
    lines = [
        f"From: {author}",
        f"To: {', '.join(recipients)}",
        f"Subject: {subject}",
        f"Message-ID: <sample-{number}@mqforensics-postfix.test>",
        "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=us-ascii",
        "",
        f"{subject}: see the attached notes.",
        "Every address in this message is fictional (the mqforensics Postfix sample).",
        "",
    ]
    return ("\r\n" if crlf else "\n").join(lines).encode()


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """The length of the record at `offset` and the size of its header (type + length bytes),
    decoded as rec_get_raw does."""
    length, shift, pos = 0, 0, offset + 1
    while True:
        byte = data[pos]
        length |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return length, pos - offset
        shift += 7


def _offsets(postcat_text: str) -> list[tuple[int, str]]:
    """(offset, rest of the line) of every record line of ``postcat -o`` output."""
    found = []
    for line in postcat_text.splitlines():
        match = re.match(r"^\s*(\d+) (.*)$", line)
        if match:
            found.append((int(match.group(1)), match.group(2)))
    return found


def _offset_of(postcat_text: str, prefix: str) -> int:
    for offset, rest in _offsets(postcat_text):
        if rest.startswith(prefix):
            return offset
    raise SystemExit(f"no record starting {prefix!r} in postcat output")


def _shift_seconds(data: bytearray, offset: int, tag: bytes, seconds: int) -> None:
    """Move the time in the record at `offset` (data starting with `tag`, then decimal seconds)
    `seconds` back, keeping its number of digits so the record's length does not change."""
    length, header = _varint(bytes(data), offset)
    start = offset + header
    body = bytes(data[start : start + length])
    if not body.startswith(tag):
        raise SystemExit(f"record at {offset} is {body!r}, not {tag!r}...")
    match = re.match(rb"\d+", body[len(tag) :])
    if not match:
        raise SystemExit(f"record at {offset} has no seconds: {body!r}")
    old = match.group(0)
    new = str(int(old) - seconds).encode()
    if len(new) != len(old):
        raise SystemExit(f"{old!r} minus {seconds} changes the digit count")
    begin = start + len(tag)
    data[begin : begin + len(old)] = new


# mail_date.c: header dates in local time, ``%a, %e %b %Y ...`` (``%d`` when built with
# TWO_DIGIT_DAY_IN_DATE_TIME): the day is two characters either way, so a date moved back by whole
# days keeps its length.
DATE_FORMS = ("%a, %e %b %Y", "%a, %d %b %Y")


def _make_older(data: bytearray, postcat_text: str, days: int) -> None:
    """Move the file's arrival `days` back, in place and without changing any record's length:
    the ``T`` record, ``A create_time=`` and the date of its ``Received:``/``Date:`` headers."""
    arrival = _arrival(bytes(data), postcat_text)
    before = len(data)
    _shift_seconds(data, _offset_of(postcat_text, "message_arrival_time: "), b"", days * DAY)
    _shift_seconds(data, _offset_of(postcat_text, "create_time: "), b"create_time=", days * DAY)
    for form in DATE_FORMS:
        old = time.strftime(form, time.localtime(arrival)).encode()
        if old in data:
            new = time.strftime(form, time.localtime(arrival - days * DAY)).encode()
            data[:] = bytes(data).replace(old, new)
            break
    else:
        raise SystemExit(f"no header date of the arrival {arrival} to move back")
    if len(data) != before:
        raise SystemExit("a record changed length")


def _arrival(data: bytes, postcat_text: str) -> float:
    """The arrival time of a queue file: its T record, ``SECONDS MICROSECONDS``."""
    offset = _offset_of(postcat_text, "message_arrival_time: ")
    length, header = _varint(data, offset)
    seconds, micros = data[offset + header : offset + header + length].split()
    return int(seconds) + int(micros) / 1e6


def _queue_bytes(info: dict, queue_id: str) -> bytes:
    path = postfix.queue_file(info, queue_id)
    if path is None:
        raise SystemExit(f"{queue_id} is in no queue")
    return path.read_bytes()


def _new_ids(existing: list[str], count: int) -> list[str]:
    """`count` unused short queue ids in Postfix's scheme (mail_queue.h: five upper-case hex
    digits of microseconds, then the inode number in hex), as wide as the real ones here."""
    inode_digits = {len(qid) - 5 for qid in existing}
    if len(inode_digits) != 1:
        raise SystemExit(f"real queue ids of different widths: {existing}")
    (width,) = inode_digits
    top = max(int(qid[5:], 16) for qid in existing)
    ids = []
    for n in range(count):
        usec = (int(time.time() * 1e6) + 7919 * (n + 1)) % 1_000_000
        candidate = f"{usec:05X}{top + 0x11 * (n + 1):0{width}X}"
        if candidate in existing or len(candidate) != 5 + width:
            raise SystemExit(f"cannot make a fresh queue id ({candidate})")
        ids.append(candidate)
    return ids


def _postcat_verdict(info: dict, path: Path) -> str:
    """What Postfix's own postcat says about a (damaged) file: its last lines and exit."""
    result = subprocess.run(
        [str(postfix.POSTCAT), "-c", info["config_directory"], "-o", str(path)],
        capture_output=True,
        text=True,
        errors="replace",
    )
    text = (result.stdout + result.stderr).replace(str(QUEUE) + "/", "")
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join([*lines[-3:], f"(exit {result.returncode})"])


def _machine_names() -> set[str]:
    """Names and addresses of this machine that must not appear in the sample."""
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        for line in Path("/etc/hosts").read_text().splitlines():
            fields = line.split("#", 1)[0].split()
            names.update(fields[1:])
            if fields and not fields[0].startswith(("127.", "::1", "fe00", "ff0")):
                names.add(fields[0])
    except OSError:
        pass
    with contextlib.suppress(OSError):
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    allowed = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
    return {name for name in names if name and name not in allowed and not name.startswith("127.")}


def _check_private(root: Path) -> None:
    names = _machine_names()
    pattern = re.compile(
        rb"(?<![\w.-])(" + b"|".join(re.escape(n.encode()) for n in names) + rb")(?![\w-])"
    )
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        match = pattern.search(path.read_bytes())
        if match:
            raise SystemExit(f"{path} names this machine ({match.group(0)!r})")
    print(f"checked: no file names this machine ({', '.join(sorted(names))})")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("run as root: the private Postfix runs as root")
    harness = Harness(SCRATCH)
    harness.stop_all(["postfix"])
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(mode=0o755)
    harness = Harness(SCRATCH)
    try:
        info = harness.ensure("postfix")
        ids: dict[str, str] = {}
        for number, (role, sender, fullname, recipients, subject, how) in enumerate(MESSAGES, 1):
            message = _message(number, sender, recipients, subject, crlf=how == "smtp")
            if how == "smtp":
                ids[role] = postfix.submit_smtp(info, sender, recipients, message)
            else:
                ids[role] = postfix.submit(info, sender, recipients, message, fullname=fullname)
            time.sleep(0.4)  # distinct arrival instants
        postfix.wait_deferred(info, ids.values(), timeout=60)
        for role in HELD:
            postfix.hold(info, ids[role])
        # The untouched queue as Postfix itself reports it, before anything is planted.
        shutil.rmtree(SAMPLE, ignore_errors=True)
        (SAMPLE / "postcat").mkdir(parents=True)
        listing = subprocess.run(
            [str(postfix.POSTQUEUE), "-c", info["config_directory"], "-j"],
            capture_output=True,
            check=True,
        ).stdout
        (SAMPLE / "postqueue.jsonl").write_bytes(listing)
        postcats = {}
        for queue_id in ids.values():
            postcats[queue_id] = postfix.postcat(info, queue_id, "-o")
            (SAMPLE / "postcat" / f"{queue_id}.txt").write_text(postcats[queue_id])
        (SAMPLE / "postconf.txt").write_text(postfix.postconf(info, "-n"))
        last_arrival = max(
            _arrival(_queue_bytes(info, queue_id), postcats[queue_id]) for queue_id in ids.values()
        )
        harness.stop("postfix")
        copied = postfix.copy_queue(info, QUEUE)
        live = Path(info["queue_directory"])
        files: dict[str, dict[str, Any]] = {}
        for copy in copied:
            st = (live / copy).stat()
            files[str(copy)] = {"mode": f"{stat.S_IMODE(st.st_mode):04o}", "mtime": st.st_mtime}
        planted = _plant(info, ids, postcats, files)
        verdicts = {
            entry["anomaly"]: _postcat_verdict(info, QUEUE / entry["path"])
            for entry in planted
            if entry["anomaly"] in ("truncated", "flipped_length", "incomplete", "corrupt")
        }
        version = postfix.version()
    finally:
        harness.stop_all(["postfix"])
    # Git keeps no empty directory: the tree has none either.
    for directory in sorted(QUEUE.rglob("*"), key=lambda p: -len(p.parts)):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
    # Modes and times the tree's files get too, as files.json records them.
    for relative, meta in files.items():
        os.chmod(QUEUE / relative, int(meta["mode"], 8))
        os.utime(QUEUE / relative, (meta["mtime"], meta["mtime"]))
    as_of = _iso(math.ceil(last_arrival) + AS_OF_AFTER)
    (SAMPLE / "as_of.txt").write_text(as_of + "\n")
    (SAMPLE / "files.json").write_text(json.dumps(dict(sorted(files.items())), indent=1) + "\n")
    (SAMPLE / "planted.json").write_text(json.dumps(planted, indent=1) + "\n")
    (SAMPLE / "ANOMALIES.md").write_text(_anomalies_md(ids, planted, verdicts, as_of))
    (SAMPLE / "README.md").write_text(_readme_md(version, as_of, len(files)))
    _check_private(SAMPLE)
    shutil.rmtree(SCRATCH, ignore_errors=True)
    print(f"wrote {SAMPLE}: {len(files)} queue files, {len(planted)} planted anomalies")


def _plant(
    info: dict, ids: dict[str, str], postcats: dict[str, str], files: dict[str, dict[str, Any]]
) -> list[dict]:
    """Damage the copy under QUEUE; one planted.json entry per anomaly. `files` is updated."""
    planted = []

    def path_of(role: str) -> str:
        queue_id = ids[role]
        found = [p for p in files if p.startswith(("deferred/", "hold/")) and p.endswith(queue_id)]
        (path,) = found
        return path

    def record(anomaly: str, path: str, queue_id: str, offset: int | None, note: str) -> None:
        planted.append(
            {"anomaly": anomaly, "path": path, "queue_id": queue_id, "offset": offset, "note": note}
        )

    # 1. truncated: the file ends in the middle of its first recipient record.
    queue_id, path = ids["truncated"], path_of("truncated")
    data = (QUEUE / path).read_bytes()
    offset = _offset_of(postcats[queue_id], "recipient: ")
    length, header = _varint(data, offset)
    (QUEUE / path).write_bytes(data[: offset + header + length // 2])
    record(
        "truncated",
        path,
        queue_id,
        offset,
        f"cut after {header + length // 2} of the {header + length} bytes (type, length, "
        f"{length} data bytes) of the R (recipient) record at {offset}: the file ends inside "
        "its data; no E record",
    )

    # 2. flipped_length: the S record's length byte gets 0x80, so the first data byte is read
    # as a second length byte and the length runs past the end of the file.
    queue_id, path = ids["flipped_length"], path_of("flipped_length")
    edited = bytearray((QUEUE / path).read_bytes())
    offset = _offset_of(postcats[queue_id], "sender: ")
    length, header = _varint(bytes(edited), offset)
    if header != 2:
        raise SystemExit("the sender record's length is not one byte")
    edited[offset + 1] |= 0x80
    flipped, _ = _varint(bytes(edited), offset)
    if flipped <= len(edited) - offset:
        raise SystemExit("the flipped length does not run past the end of the file")
    (QUEUE / path).write_bytes(bytes(edited))
    record(
        "flipped_length",
        path,
        queue_id,
        offset,
        f"length byte {length:#04x} of the S (sender) record made {length | 0x80:#04x}: the "
        f"length now reads {flipped} bytes, the file has {len(edited) - offset} from there",
    )

    # 3. orphan_log: the message file is gone, its defer log stays, last written two days
    # before (an rm in the queue long ago: what a retention rule for orphans selects).
    queue_id, path = ids["orphan_log"], path_of("orphan_log")
    (QUEUE / path).unlink()
    del files[path]
    log = f"defer/{path.split('/')[1]}/{queue_id}"
    files[log]["mtime"] -= 2 * DAY
    record(
        "orphan_log",
        log,
        queue_id,
        None,
        f"{path} was removed from the copy; this defer log has no message, and was last "
        "written 2 days before as-of",
    )

    # 4./5. copies under new ids: `incomplete` (incoming/, cut before E, mode 0600 as cleanup
    # creates it, a day old) and `corrupt` (corrupt/, whole). The source's id inside the copy
    # (Received: header) becomes the new one: same width, so no record changes length.
    real_ids = sorted(ids.values())
    incomplete_id, corrupt_id = _new_ids(real_ids, 2)
    for anomaly, new_id, role, queue in (
        ("incomplete", incomplete_id, "clean_three_rcpt", "incoming"),
        ("corrupt", corrupt_id, "clean_bounce", "corrupt"),
    ):
        source_id, source = ids[role], path_of(role)
        edited = bytearray(
            (QUEUE / source).read_bytes().replace(source_id.encode(), new_id.encode())
        )
        target = f"{queue}/{new_id}"
        (QUEUE / queue).mkdir(exist_ok=True)
        if anomaly == "incomplete":
            # A writer that died a day before as-of: older than any grace for a file in progress,
            # younger than the 7 days after which `postsuper -p` removes it (MAX_TEMP_AGE).
            _make_older(edited, postcats[source_id], 1)
            end = _offset_of(postcats[source_id], "*** MESSAGE FILE END")
            if edited[end : end + 2] != b"E\x00":
                raise SystemExit(f"no E record at {end} in {source}")
            del edited[end:]
            (QUEUE / target).write_bytes(bytes(edited))
            files[target] = {"mode": "0600", "mtime": _arrival(bytes(edited), postcats[source_id])}
            record(
                "incomplete",
                target,
                new_id,
                end,
                f"a copy of {source} ({source_id}) made a day older (T, create_time, header "
                f"dates) and cut just before its E record (the file ends at {end}), mode 0600: "
                "cleanup never marked it ready; mtime its (new) arrival time",
            )
        else:
            (QUEUE / target).write_bytes(bytes(edited))
            files[target] = {"mode": "0700", "mtime": _arrival(bytes(edited), postcats[source_id])}
            record(
                "corrupt",
                target,
                new_id,
                None,
                f"a whole copy of {source} ({source_id}) in corrupt/, where qmgr moves a "
                "file it cannot read; mtime its arrival time",
            )

    # 6. expired: arrival 30 days earlier (T, create_time, header dates), same lengths.
    # 7. old_hold: the same 20 days earlier for a held message, whose file and defer log times
    # go back with it (held since; postsuper -h renames, keeping the mtime qmgr set).
    for anomaly, role, days in (("expired", "expired", 30), ("old_hold", "old_hold", 20)):
        queue_id, path = ids[role], path_of(role)
        edited = bytearray((QUEUE / path).read_bytes())
        _make_older(edited, postcats[queue_id], days)
        (QUEUE / path).write_bytes(bytes(edited))
        t_offset = _offset_of(postcats[queue_id], "message_arrival_time: ")
        c_offset = _offset_of(postcats[queue_id], "create_time: ")
        moved = f"T (arrival, at {t_offset}), A create_time= (at {c_offset}) and the header dates"
        if anomaly == "old_hold":
            log = f"defer/{queue_id[0]}/{queue_id}"
            for changed in (path, log):
                files[changed]["mtime"] -= days * DAY
            note = f"{moved} {days} days earlier; the hold file's and its defer log's mtimes too"
        else:
            note = (
                f"{moved} {days} days earlier; mtimes kept (the next retry, and the last "
                "attempt, are recent: still being retried)"
            )
        record(anomaly, path, queue_id, t_offset, note)

    # 8. deferred_without_log: the defer log of a deferred message is removed.
    queue_id, path = ids["deferred_without_log"], path_of("deferred_without_log")
    log = f"defer/{path.split('/')[1]}/{queue_id}"
    (QUEUE / log).unlink()
    del files[log]
    record(
        "deferred_without_log",
        path,
        queue_id,
        None,
        f"{log} was removed from the copy: a deferred message without its defer log",
    )

    return planted


# What a reader of the queue should find for each planted anomaly (ANOMALIES.md).
FINDS = {
    "truncated": (
        "The file ends inside the record at the offset: `rec_get_raw` would meet EOF inside its "
        "data. No `E` record, yet mode 0700 (a ready file, not one being written): a damaged "
        "queue file. The records before the offset read as usual."
    ),
    "flipped_length": (
        "The sender (`S`) record's length byte has its high bit set, so the byte after it (the "
        "first letter of the address) is read as a second 7-bit length group; that length runs "
        "past the end of the file. Damage at the offset; `C`, `T` and the `A` records before "
        "it read as usual."
    ),
    "orphan_log": (
        "A `defer/` log whose queue id has no message file in any queue. (postsuper -d removes "
        "a message's logs before its file, postsuper.c `delete_one`, so a crash or a hand-made "
        "`rm` leaves this, not the reverse.)"
    ),
    "incomplete": (
        "A file in `incoming/` at mode 0600 that ends before its `E` record: cleanup creates "
        "queue files at 0600 and makes them 0700 once complete (QSHAPE_README), and the queue "
        "manager ignores the 0600 ones. A day old at as-of (cleanup takes milliseconds): a "
        "writer that died, not one still writing; `postsuper -p` removes such files only after "
        "7 days (`MAX_TEMP_AGE`)."
    ),
    "corrupt": (
        "A file in `corrupt/`, where the queue manager moves a queue file it cannot use "
        '(`qmgr_active_corrupt`); `postfix check` warns "damaged message" for each. This one '
        "is whole and readable: the finding is where it is."
    ),
    "expired": (
        "Still in `deferred/`, arrived 30 days before as-of: past `maximal_queue_lifetime` "
        "(default 5d, not overridden in postconf.txt), so Postfix should have returned it. Its "
        "file mtime (the next retry, set by qmgr) and its defer log's (the last attempt) are "
        "recent: the message is still being retried."
    ),
    "old_hold": (
        "On hold since 20 days before as-of (its `T`, create_time, and the mtimes of its file and "
        "defer log). Held mail does not expire (postsuper(1) `-h`): it stays until released or "
        "deleted."
    ),
    "deferred_without_log": (
        "A deferred message with no `defer/` log: postqueue -j would give its recipients no "
        "`delay_reason`, and nothing says why it was deferred."
    ),
}


def _anomalies_md(
    ids: dict[str, str], planted: list[dict], verdicts: dict[str, str], as_of: str
) -> str:
    by_role = {role: (sender, recipients) for role, sender, _, recipients, _, _ in MESSAGES}
    lines = [
        "# The bundled Postfix sample: what is in it, and what was planted",
        "",
        "Nine messages written by the real Postfix (see README.md), all deferred by the queue",
        "manager (relayhost on a closed port: `Connection refused`), two then held with",
        "`postsuper -h`. `postqueue.jsonl` and `postcat/` show the queue as Postfix left it,",
        "before anything was planted; the anomalies below were planted in the copy,",
        f"`queue/`. Judge the sample at **{as_of}** (`as_of.txt`).",
        "",
        "| queue id | role | sender | recipients |",
        "|---|---|---|---|",
    ]
    for role, queue_id in ids.items():
        sender, recipients = by_role[role]
        lines.append(f"| `{queue_id}` | {role} | `{sender or '<>'}` | {', '.join(recipients)} |")
    lines += [
        "",
        "The roles `clean_three_rcpt` (deferred, three recipients), `clean_bounce` (deferred, the",
        "null sender: postqueue -j says `MAILER-DAEMON`) and `clean_hold` (on hold since the",
        "sample was written) are untouched: no finding beyond their state.",
        "",
        "## Planted anomalies (`planted.json`)",
        "",
    ]
    for entry in planted:
        offset = "none" if entry["offset"] is None else str(entry["offset"])
        lines += [
            f"### `{entry['anomaly']}`: `{entry['queue_id']}`",
            "",
            f"- file: `queue/{entry['path']}`; offset: {offset}",
            f"- planted: {entry['note']}",
            f"- a reader should find: {FINDS[entry['anomaly']]}",
        ]
        if entry["anomaly"] in verdicts:
            lines += [
                "- Postfix's own `postcat -o` on the planted file ends with:",
                "",
                "  ```",
                *(f"  {line}" for line in verdicts[entry["anomaly"]].splitlines()),
                "  ```",
            ]
        lines.append("")
    return "\n".join(lines)


def _readme_md(version: str, as_of: str, count: int) -> str:
    return f"""\
# The bundled Postfix sample

A Postfix queue written by the real Postfix {version} (Debian 12's package) in a private
instance of the test harness (`mqforensics.services.postfix`), made by

    sudo .venv/bin/python -m datasets.postfix.make_sample

(`datasets/postfix/make_sample.py`, run as root). `myhostname` is
`mqforensics-postfix.test`; every address is fictional (example.org, example.com,
example.net), and the script refuses to finish if any file names the machine it ran on. Eight
messages went in through Postfix's sendmail as root (`Received: by mqforensics-postfix.test
(Postfix, from userid 0)`), one over SMTP from 127.0.0.1 saying `EHLO client.example.net` (its
queue file has the `log_client_*`, `client_*` and `helo_name` attributes: `localhost`,
`127.0.0.1`). The relayhost was a loopback port nothing listened on, so the queue manager
deferred every message at its first attempt (`Connection refused`) and set its next attempt an
hour later (`minimal_backoff_time = 1h`).

- `queue/`: the instance's message queues and per-message logs, hashed subdirectories kept
  (`deferred/` and `defer/` by the id's first character: `hash_queue_names = deferred, defer`,
  `hash_queue_depth = 1`), with the anomalies of ANOMALIES.md planted in this copy. Empty queue
  directories are not here (git keeps none).
- `files.json`: every file of `queue/`, its mode and mtime, which git does not keep; a
  materializer must restore them. A message file is `0700` once cleanup has finished it,
  `0600` before; the defer logs are `0600`. The mtimes are Postfix's own (a deferred
  file's is its next retry, set by the queue manager; a log's is its last write), except for
  the planted files (ANOMALIES.md). The files' owner was `postfix`; git keeps no owner.
- `as_of.txt`: {as_of}, ten minutes after the last message arrived: the instant to judge
  the sample at.
- `postqueue.jsonl`: `postqueue -j` of the untouched queue (before planting).
- `postcat/<queue id>.txt`: `postcat -o -q <queue id>` of every message (before planting;
  postcat prints times in the machine's zone, UTC here).
- `postconf.txt`: `postconf -n` of the instance (its main.cf; the paths were the
  throwaway instance's).
- `planted.json`: the planted anomalies (`anomaly`, `path` under `queue/`, `queue_id`,
  `offset` of the damaged record or null, `note`); ANOMALIES.md says what a reader should find.

{count} files under `queue/`.
"""


if __name__ == "__main__":
    main()
