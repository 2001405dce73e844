"""Make the slimta pickle fixtures in tests/data/slimta/pickles/ with the REAL python-slimta.

How the committed fixtures were made (python-slimta 5.0.5, Python 3.11.7):

    python3.11 -m venv /tmp/slimvenv
    /tmp/slimvenv/bin/pip install 'python-slimta[redis,disk]==5.0.5'
    mkdir -p /tmp/empty && cd /tmp/empty      # slimta's imports break on a stray inspect.py in cwd
    /tmp/slimvenv/bin/python /work/main/datasets/slimta/make_pickle_fixtures.py \\
        /work/main/tests/data/slimta/pickles

The product never imports slimta; this script is the only code that does. It builds real
`slimta.envelope.Envelope` / `slimta.bounce.Bounce` objects (parsed with slimta's own
`Envelope.parse`, header policies `AddDateHeader`, `AddMessageIdHeader`, `AddReceivedHeader`
applied), pickles each with protocols 0, 2, 4 and 5 (5 = HIGHEST_PROTOCOL, what slimta writes),
and stores what slimta writes through its own storage classes: `DiskStorage` (real files, via
pyaio) and `RedisStorage` (a recording stand-in for the redis client, so the bytes are exactly
the ones slimta passes to HSETNX/HSET/RPUSH). `expected.json` holds, for every file, the values
slimta itself sees after `pickle.loads` of that file.

Determinism: TZ=UTC, `uuid.uuid4` replaced by a counter (message ids, bounce boundaries, queue
ids) and fixed timestamps, so a re-run with the same Python and slimta gives the same bytes.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"
time.tzset()
warnings.simplefilter("ignore")  # slimta.core imports the deprecated pkg_resources

_counter = itertools.count(1)
uuid.uuid4 = lambda: uuid.UUID(int=next(_counter))  # type: ignore[assignment]

from slimta.bounce import Bounce  # noqa: E402
from slimta.diskstorage import DiskStorage  # noqa: E402
from slimta.envelope import Envelope  # noqa: E402
from slimta.policy.headers import (  # noqa: E402
    AddDateHeader,
    AddMessageIdHeader,
    AddReceivedHeader,
)
from slimta.redisstorage import RedisStorage  # noqa: E402
from slimta.smtp.reply import Reply  # noqa: E402

PROTOCOLS = (0, 2, 4, 5)
T0 = 1700000000.25

PLAIN = (
    b"From: Alice Example <alice@example.com>\r\n"
    b"To: Bob <bob@example.org>, carol@example.net\r\n"
    b"Subject: caf\xc3\xa9 menu\r\n"  # raw 8-bit header: parsed into a surrogateescape str
    b"X-Folded: part one\r\n\tpart two\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"\r\n"
    b"Hello Bob,\r\nlunch at noon?\r\n"
)

MULTIPART = (
    b"From: carol@example.net\r\n"
    b"To: dave@example.org\r\n"
    b"Subject: report\r\n"
    b"Date: Tue, 14 Nov 2023 22:00:00 +0000\r\n"
    b"Message-ID: <report-1@example.net>\r\n"
    b"MIME-Version: 1.0\r\n"
    b'Content-Type: multipart/alternative; boundary="b1"\r\n'
    b"\r\n"
    b"preamble\r\n"
    b"--b1\r\nContent-Type: text/plain\r\n\r\nplain part\r\n"
    b"--b1\r\nContent-Type: text/html\r\n\r\n<p>html part</p>\r\n"
    b"--b1--\r\n"
)

BROKEN_HEADERS = (
    b" continuation before any header\r\n"
    b"Subject: broken\r\n"
    b"this line has no colon\r\n"
    b"X-After: lost in the body\r\n"
    b"\r\n"
    b"body\r\n"
)


def _apply_policies(env: Envelope) -> None:
    for policy in (AddDateHeader(), AddMessageIdHeader("mx.example.org"), AddReceivedHeader()):
        policy.apply(env)


def build_envelopes() -> dict[str, Envelope]:
    plain = Envelope("alice@example.com", ["bob@example.org", "carol@example.net"])
    plain.parse(PLAIN)
    plain.client = {
        "ip": "192.0.2.10",
        "host": "client.example.com",
        "name": "client.example.com",
        "protocol": "ESMTPSA",
        "auth": ("alice", None),  # SmtpEdge stores (authcid, authzid)
    }
    plain.receiver = "mx.example.org"
    plain.timestamp = T0
    _apply_policies(plain)

    multi = Envelope("carol@example.net", ["dave@example.org"])
    multi.parse(MULTIPART)
    multi.client = {
        "ip": "198.51.100.7",
        "host": None,
        "name": "[198.51.100.7]",
        "protocol": "ESMTPS",
        "auth": None,
    }
    multi.receiver = "mx.example.org"
    multi.timestamp = T0 + 60
    _apply_policies(multi)  # Date and Message-ID exist: only Received (a plain str) is added

    reply = Reply("550", "5.1.1 Recipient address rejected", address=("mx2.example.net", 25))
    bounce_full = Bounce(plain, reply)
    bounce_full.timestamp = T0 + 100
    bounce_headers = Bounce(plain, reply, headers_only=True)
    bounce_headers.timestamp = T0 + 101

    unparsed = Envelope("erin@example.com", ["frank@example.org"])

    objects = Envelope("alice@example.com", ["bob@example.org"])
    objects.parse(b"Subject: header objects\r\n\r\nbody\r\n")
    objects.timestamp = T0 + 200
    # Headers assigned through Message.__setitem__ become email.headerregistry objects, like
    # the ones slimta's AddDateHeader/AddMessageIdHeader and SpamAssassin policy create.
    objects.headers["Reply-To"] = (
        'Friends: a@example.com, "Bob X" <bob@example.org>;, c@example.net'
    )
    objects.headers["MIME-Version"] = "1.0"
    objects.headers["Content-Type"] = 'text/plain; charset="utf-8"; format=flowed'
    objects.headers["Content-Transfer-Encoding"] = "8bit"
    objects.headers["Content-Disposition"] = 'inline; filename="a b.txt"'
    objects.headers["X-Spam-Status"] = "NO"
    objects.headers["X-Encoded"] = "=?utf-8?q?caf=C3=A9?= x"
    objects.headers["Message-Id"] = "not a msg-id"  # InvalidHeaderDefect in the header state
    objects.headers["Date"] = "not a date"  # InvalidDateDefect

    broken = Envelope("mallory@example.com", ["bob@example.org"])
    broken.parse(BROKEN_HEADERS)  # Message.defects holds email.errors defect instances
    broken.timestamp = T0 + 300

    return {
        "envelope_policies": plain,
        "envelope_multipart": multi,
        "bounce_full": bounce_full,
        "bounce_headers_only": bounce_headers,
        "envelope_unparsed": unparsed,
        "envelope_header_objects": objects,
        "envelope_parse_defects": broken,
    }


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def expected_envelope(env: Envelope, protocol: int) -> dict[str, Any]:
    """slimta's own view of an unpickled envelope, in the shape of the product's EnvelopeData."""
    headers = [[name, str(value)] for name, value in env.headers._headers] if env.headers else []
    body = env.message or b""
    if env.headers is None:
        message_bytes = len(body)
        flattened = None
    else:
        lines = sum(_utf8_len(n) + 2 + _utf8_len(v) + 2 for n, v in headers)
        message_bytes = lines + 2 + len(body)
        flattened = sum(len(part) for part in env.flatten())  # BytesGenerator refolds
    ids = [v for n, v in headers if n.lower() == "message-id"]
    return {
        "sender": env.sender,
        "recipients": list(env.recipients),
        "client": {k: None if v is None else str(v) for k, v in env.client.items()},
        "receiver": env.receiver,
        "timestamp": env.timestamp,
        "headers": headers,
        "body_bytes": len(body),
        "message_bytes": message_bytes,
        "flattened_bytes": flattened,
        "is_bounce": isinstance(env, Bounce),
        "message_id": ids[0] if ids else None,
        "pickle_protocol": protocol,
    }


def expected_meta(meta: dict[str, Any]) -> dict[str, Any]:
    indexes = meta.get("delivered_indexes")
    return {
        "timestamp": meta.get("timestamp"),
        "attempts": meta.get("attempts"),
        "delivered_indexes": None if indexes is None else sorted(indexes),
        "delivered_indexes_type": None if indexes is None else type(indexes).__name__,
        "extra_keys": sorted(set(meta) - {"timestamp", "attempts", "delivered_indexes"}),
    }


class RecordingRedis:
    """Just enough of redis.StrictRedis for RedisStorage.write/set_recipients_delivered."""

    def __init__(self) -> None:
        self.hashes: dict[str, dict[str, Any]] = {}
        self.lists: dict[str, list[bytes]] = {}

    def hsetnx(self, key: str, field: str, value: bytes) -> bool:
        fields = self.hashes.setdefault(key, {})
        if field in fields:
            return False
        fields[field] = value
        return True

    def hset(self, key: str, field: str, value: Any) -> None:
        self.hashes.setdefault(key, {})[field] = value

    def hget(self, key: str, field: str) -> Any:
        return self.hashes.get(key, {}).get(field)

    def hmset(self, key: str, mapping: dict[str, Any]) -> None:
        self.hashes.setdefault(key, {}).update(mapping)

    def rpush(self, key: str, value: bytes) -> None:
        self.lists.setdefault(key, []).append(value)

    def pipeline(self) -> RecordingRedis:
        return self

    def execute(self) -> None:
        pass


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.suffix in {".pickle", ".env", ".meta", ".json"}:
            old.unlink()
    expected: dict[str, Any] = {
        "made_with": {
            "python": sys.version.split()[0],
            "slimta": __import__("slimta.core").core.__version__,
        },
        "envelopes": {},
        "metas": {},
        "delivered_indexes": {},
        "queue_entries": {},
    }

    def keep(name: str, data: bytes, section: str, value: Any) -> None:
        (out / name).write_bytes(data)
        expected[section][name] = value

    def keep_envelope(name: str, data: bytes, protocol: int) -> None:
        keep(name, data, "envelopes", expected_envelope(pickle.loads(data), protocol))

    envelopes = build_envelopes()
    for name, env in envelopes.items():
        for protocol in PROTOCOLS:
            keep_envelope(f"{name}.p{protocol}.pickle", pickle.dumps(env, protocol), protocol)

    # DiskStorage: the .env/.meta files exactly as slimta writes them (HIGHEST_PROTOCOL).
    with tempfile.TemporaryDirectory() as scratch:
        dirs = [os.path.join(scratch, d) for d in ("env", "meta", "tmp")]
        for d in dirs:
            os.mkdir(d)
        disk = DiskStorage(*dirs)
        qid = disk.write(envelopes["envelope_policies"], T0 + 1)
        env_bytes = Path(dirs[0], qid + ".env").read_bytes()
        keep_envelope("disk.env", env_bytes, pickle.HIGHEST_PROTOCOL)
        meta_path = Path(dirs[1], qid + ".meta")
        data = meta_path.read_bytes()
        keep("disk_new.meta", data, "metas", expected_meta(pickle.loads(data)))
        disk.set_recipients_delivered(qid, [1])
        disk.increment_attempts(qid)
        disk.set_timestamp(qid, T0 + 301)
        data = meta_path.read_bytes()
        keep("disk_delivered.meta", data, "metas", expected_meta(pickle.loads(data)))

    # RedisStorage: the hash fields and queue-list items slimta sends to redis.
    redis_store = RedisStorage(prefix="slimta:")
    fake = RecordingRedis()
    redis_store.redis = fake
    qid = redis_store.write(envelopes["envelope_multipart"], T0 + 2)
    fields = fake.hashes["slimta:" + qid]
    keep_envelope("redis_envelope.pickle", fields["envelope"], pickle.HIGHEST_PROTOCOL)
    entry = fake.lists["slimta:queue"][0]
    keep("redis_queue_entry.pickle", entry, "queue_entries", list(pickle.loads(entry)))
    # slimta.queue.Queue passes a *set* (test_slimta_queue.py expects set([0, 2])).
    redis_store.set_recipients_delivered(qid, {0, 2})
    data = fields["delivered_indexes"]
    loaded = pickle.loads(data)
    keep(
        "redis_delivered_indexes.pickle",
        data,
        "delivered_indexes",
        {"indexes": sorted(loaded), "type": type(loaded).__name__},
    )

    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(list(out.iterdir()))} files to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTDIR")
    main(Path(sys.argv[1]).resolve())
