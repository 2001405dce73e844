"""Write a python-slimta DiskStorage spool of COUNT envelopes with the real python-slimta 5.0.5.

Runs under the slimta runtime (`mqforensics.services.slimta_runtime`), never under the product's
interpreter (imports nothing of this repository). Also measures python-slimta's own load.

    python slimta_spool_writer.py write COUNT SEED ENV_DIR META_DIR TMP_DIR   > facts.json
    python slimta_spool_writer.py load ENV_DIR META_DIR      (prints one result line)
    python slimta_spool_writer.py load-ids ENV_DIR META_DIR

``write``: every envelope through ``DiskStorage.write`` (the ``.env`` pickle, then the ``.meta``,
each by mkstemp in TMP_DIR and a rename), `CONCURRENCY` greenlets at once as a busy edge would;
then some are retried (``increment_attempts`` and ``set_timestamp``, as slimta's Queue does
after a transient failure) and some partly delivered (``set_recipients_delivered`` with a
list). Prints the facts the readers must find: envelopes, pending recipients, sender bytes.

``load``: ``DiskStorage.load()`` (every ``.meta``) and ``get(id)`` of every id it yields (the
``.meta`` again and the ``.env``, unpickled to an `Envelope`, delivered recipients removed),
`CONCURRENCY` greenlets at a time: what slimta reads to know every queued message.
``load-ids``: ``load()`` alone. Each prints one line, ``MQF-BENCH-RESULT {"seconds": ...,
"output": ...}``, timed from before the first read.
"""

import json
import random
import resource
import sys
import time

import gevent
import gevent.pool
from slimta.diskstorage import DiskStorage
from slimta.envelope import Envelope

CONCURRENCY = 64
DAY = 86400.0
DOMAINS = ("example.org", "example.com", "example.net", "mail.example.org", "example.edu")
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy")
LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua.\r\n"
)


def _recipients(rng, n):
    roll = rng.random()
    count = 1 if roll < 0.65 else rng.randint(2, 3) if roll < 0.9 else rng.randint(4, 20)
    return [f"{rng.choice(NAMES)}.{n * 32 + i}@{rng.choice(DOMAINS)}" for i in range(count)]


def envelope(rng, n, now):
    sender = "" if rng.random() < 0.05 else f"{rng.choice(NAMES)}.{n}@{rng.choice(DOMAINS)}"
    recipients = _recipients(rng, n)
    env = Envelope(sender, recipients)
    body_bytes = int(min(16384, 150 * 1.8 ** rng.uniform(0, 8)))
    body = (LOREM * (body_bytes // len(LOREM) + 1))[:body_bytes]
    env.parse(
        (
            f"From: {sender or 'MAILER-DAEMON@mx.mqforensics.test'}\r\n"
            f"To: {', '.join(recipients[:3])}\r\nSubject: message {n}\r\n"
            f"Message-ID: <bench-{n}@mx.mqforensics.test>\r\n\r\n{body}"
        ).encode()
    )
    env.client = {"ip": f"192.0.2.{n % 250 + 1}", "host": "client.example", "name":
                  "helo.example", "protocol": "ESMTPS", "auth": None}  # fmt: skip
    env.receiver = "mx.mqforensics.test"
    env.timestamp = now - rng.uniform(0, 5 * DAY)
    return env


def write(count, seed, env_dir, meta_dir, tmp_dir):
    rng = random.Random(f"mqforensics-bench-slimta-{seed}")
    store = DiskStorage(env_dir, meta_dir, tmp_dir)
    now = time.time()
    envelopes = [envelope(rng, n, now) for n in range(count)]
    ids = [None] * count
    pool = gevent.pool.Pool(CONCURRENCY)

    def one(n):
        ids[n] = store.write(envelopes[n], now)

    for n in range(count):
        pool.spawn(one, n)
    pool.join(raise_error=True)
    delivered = 0
    for n in range(count):
        roll = rng.random()
        if roll < 0.25:  # a transient failure, maybe two: retried later
            for _ in range(rng.randint(1, 2)):
                store.increment_attempts(ids[n])
            store.set_timestamp(ids[n], now + rng.uniform(60, 3600))
        if roll < 0.05 and len(envelopes[n].recipients) > 1:  # partly delivered
            store.set_recipients_delivered(ids[n], [0])
            delivered += 1
    facts = {
        "envelopes": count,
        "recipients": sum(len(e.recipients) for e in envelopes) - delivered,
        "sender_bytes": sum(len(e.sender.encode()) for e in envelopes),
        "null_senders": sum(1 for e in envelopes if not e.sender),
    }
    print(json.dumps(facts))


def _peak_rss():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load(env_dir, meta_dir, with_get):
    store = DiskStorage(env_dir, meta_dir)
    started = time.perf_counter()
    envelopes = recipients = sender_bytes = null_senders = 0
    ids = [queue_id for _, queue_id in store.load()]
    envelopes = len(ids)
    if with_get:
        pool = gevent.pool.Pool(CONCURRENCY)
        for env, _ in pool.imap_unordered(store.get, ids):
            recipients += len(env.recipients)
            sender_bytes += len(env.sender.encode())
            null_senders += not env.sender
    seconds = time.perf_counter() - started
    output = {"envelopes": envelopes}
    if with_get:
        output.update(recipients=recipients, sender_bytes=sender_bytes, null_senders=null_senders)
    line = {"seconds": round(seconds, 3), "python_peak_rss": _peak_rss(), "output": output}
    print("MQF-BENCH-RESULT " + json.dumps(line), flush=True)


def main(argv):
    if argv[0] == "write":
        write(int(argv[1]), argv[2], *argv[3:6])
    elif argv[0] in ("load", "load-ids"):
        load(argv[1], argv[2], with_get=argv[0] == "load")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    gevent.spawn(main, sys.argv[1:]).get()
