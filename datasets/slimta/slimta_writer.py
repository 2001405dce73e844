"""Write a slimta queue store with the REAL python-slimta 5.0.5, then plant documented anomalies.

Runs under the slimta runtime (`mqforensics.services.slimta_runtime`), never under the product's
interpreter: the product must read what real slimta wrote without slimta installed.

    python slimta_writer.py disk ENV_DIR META_DIR TMP_DIR  > truth.json
    SLIMTA_REDIS_PASSWORD=... python slimta_writer.py redis HOST PORT PREFIX > truth.json
    python slimta_writer.py pickles OUT_DIR > truth.json   (envelope pickles for the S3 test)

Normal traffic goes through slimta's own `Queue` with a scripted relay (gevent), so attempts,
next-attempt times and delivered indexes are written by slimta itself:

- ``fresh``: queued, the relay never reached (no relay attempt yet: a Queue without a relay);
- ``retried``: two transient failures (``attempts`` 2, next attempt in the future);
- ``partial``: one recipient delivered, one deferred: `Queue` passes a *set* of indexes, which
  DiskStorage cannot add to its list (TypeError, caught and reported here as ``partial_error``)
  and RedisStorage stores as a pickled set;
- ``old``: received 30 days ago (the envelope's own timestamp);
- ``bounce``: a `Bounce` of a message (null sender).

Planted anomalies, each exactly what a crash or an attacker leaves (the id in the output):

- disk: ``torn_env`` (``write_env`` only: the crash between slimta's two writes), ``torn_meta``
  (``write_meta`` only), ``corrupt_meta`` (a real ``.meta`` truncated), ``broken_env`` (a real
  ``.env`` truncated), ``hostile_env`` / ``hostile_meta`` (pickles that would run a command),
  ``stale_tmp`` (an envelope pickle left in tmp_dir by a failed rename) and ``fresh_tmp``;
- redis: ``torn_env`` (HSETNX of the envelope only), ``torn_meta`` (timestamp/attempts only),
  ``hostile_env``, ``dangling`` (a queue entry naming no hash), ``hostile_entry`` (a queue entry
  that would run a command), ``wrong_type`` (a string key under the prefix).

The output also says what real slimta does with the result: ``load_error`` is the exception
slimta's own ``load()`` raises on the store (None if it loads), so tests can check the product's
findings against the real program's behaviour.
"""

import json
import os
import pickle
import sys
import tempfile
import time

import gevent
from slimta.bounce import Bounce
from slimta.envelope import Envelope
from slimta.queue import Queue
from slimta.relay import Relay, TransientRelayError
from slimta.smtp.reply import Reply

DAY = 86400.0
NOW = time.time()
MARKER = "/tmp/mqforensics-slimta-hostile-payload-ran"


class Hostile:
    """Pickles to a call of os.system: what an attacker with write access to the store plants."""

    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


def envelope(sender, recipients, subject, arrived=NOW):
    env = Envelope(sender, list(recipients))
    env.parse(
        f"From: {sender}\r\nTo: {', '.join(recipients)}\r\nSubject: {subject}\r\n\r\n"
        f"Body of {subject}.\r\n".encode()
    )
    env.client = {"ip": "192.0.2.10", "host": "client.example", "name": "helo.example",
                  "protocol": "ESMTPS", "auth": None}  # fmt: skip
    env.receiver = "mx.mqforensics.test"
    env.timestamp = arrived
    return env


class ScriptedRelay(Relay):
    """Per recipient: delivered (None), or a transient failure for addresses containing 'defer'."""

    def attempt(self, env, attempts):
        results = {}
        for rcpt in env.recipients:
            if "defer" in rcpt:
                results[rcpt] = TransientRelayError("try later", Reply("450", "4.2.0 later"))
            else:
                results[rcpt] = None
        if all(isinstance(r, TransientRelayError) for r in results.values()):
            raise TransientRelayError("try later", Reply("450", "4.2.0 later"))
        return results


def traffic(store):
    """Messages written by slimta's own Queue; returns role -> id, and the partial error."""
    roles = {}
    passive = Queue(store, relay=None)  # enqueue stores; without a relay nothing is attempted
    ((_, roles["fresh"]),) = passive.enqueue(
        envelope("alice@example.com", ["bob@example.org"], "fresh")
    )
    ((_, roles["old"]),) = passive.enqueue(
        envelope("carol@example.com", ["dave@example.org"], "old", NOW - 30 * DAY)
    )
    bounce = Bounce(envelope("erin@example.com", ["frank@example.org"], "bounced"),
                    Reply("550", "5.1.1 no such user"))  # fmt: skip
    ((_, roles["bounce"]),) = passive.enqueue(bounce)
    errors = []
    active = Queue(store, relay=ScriptedRelay(), backoff=lambda env, attempts: 600.0)
    ((_, roles["retried"]),) = active.enqueue(
        envelope("grace@example.com", ["defer.heidi@example.org"], "retried")
    )
    ((_, roles["partial"]),) = active.enqueue(
        envelope("ivan@example.com", ["judy@example.org", "defer.ken@example.org"], "partial")
    )
    gevent.sleep(0.5)
    # A second transient failure of `retried`, exactly as the Queue's retry would do it.
    env, attempts = store.get(roles["retried"])
    try:
        active._attempt(roles["retried"], env, attempts)
    except Exception as exc:
        errors.append(repr(exc))
    gevent.sleep(0.5)
    return roles


def partial_error(store, message_id):
    """What slimta's set_recipients_delivered does with the set `Queue` passes."""
    try:
        store.set_recipients_delivered(message_id, {0})
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def load_error(store):
    try:
        list(store.load())
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def write_disk(env_dir, meta_dir, tmp_dir):
    from slimta.diskstorage import DiskStorage

    store = DiskStorage(env_dir, meta_dir, tmp_dir)
    roles = traffic(store)
    # `partial`: Queue's own call already failed inside its greenlet; show the failure again.
    out = {"roles": roles, "partial_error": partial_error(store, roles["partial"])}
    ops = store.ops
    roles["torn_env"] = "a" * 32
    ops.write_env(roles["torn_env"], envelope("lena@example.com", ["mike@example.org"], "torn"))
    roles["torn_meta"] = "b" * 32
    ops.write_meta(roles["torn_meta"], {"timestamp": NOW, "attempts": 0})
    for role, name, char in (("corrupt_meta", "meta", "c"), ("broken_env", "env", "e")):
        roles[role] = char * 32
        env = envelope("nina@example.com", ["oscar@example.org"], role)
        ops.write_env(roles[role], env)
        ops.write_meta(roles[role], {"timestamp": NOW, "attempts": 0})
        directory, suffix = (meta_dir, ".meta") if name == "meta" else (env_dir, ".env")
        path = os.path.join(directory, roles[role] + suffix)
        with open(path, "rb") as handle:
            data = handle.read()
        with open(path, "wb") as handle:
            handle.write(data[: len(data) // 2])
    out["load_error"] = load_error(store)  # before the hostile files: slimta would run them
    roles["hostile_env"] = "f" * 32
    with open(os.path.join(env_dir, roles["hostile_env"] + ".env"), "wb") as f:
        f.write(pickle.dumps(Hostile(), pickle.HIGHEST_PROTOCOL))
    ops.write_meta(roles["hostile_env"], {"timestamp": NOW, "attempts": 0})
    roles["hostile_meta"] = "1" * 32
    ops.write_env(roles["hostile_meta"], envelope("pat@example.com", ["quinn@example.org"], "h"))
    with open(os.path.join(meta_dir, roles["hostile_meta"] + ".meta"), "wb") as f:
        f.write(pickle.dumps({"timestamp": NOW, "attempts": Hostile()}, 2))
    for role, age in (("stale_tmp", 2 * 3600), ("fresh_tmp", 0)):
        fd, path = tempfile.mkstemp(dir=tmp_dir)
        env = envelope("rose@example.com", ["sam@example.org"], role, NOW - age)
        os.write(fd, pickle.dumps(env, pickle.HIGHEST_PROTOCOL))
        os.close(fd)
        os.utime(path, (NOW - age, NOW - age))
        roles[role] = os.path.basename(path)
    # Crash-era files are an hour old (older than the torn-write grace); traffic stays fresh.
    for role in ("torn_env", "torn_meta", "corrupt_meta", "broken_env", "hostile_env",
                 "hostile_meta"):  # fmt: skip
        for directory, suffix in ((env_dir, ".env"), (meta_dir, ".meta")):
            path = os.path.join(directory, roles[role] + suffix)
            if os.path.exists(path):
                os.utime(path, (NOW - 3600, NOW - 3600))
    out["hostile_payload_ran"] = os.path.exists(MARKER)
    return out


def write_redis(host, port, prefix):
    from slimta.redisstorage import RedisStorage

    password = os.environ.get("SLIMTA_REDIS_PASSWORD") or None
    store = RedisStorage(host=host, port=int(port), password=password, prefix=prefix)
    roles = traffic(store)
    out = {"roles": roles}
    r = store.redis
    # What the running Queue's wait() would have consumed: keep the list as a crash leaves it.
    out["queue_entries"] = r.llen(store.queue_key)
    roles["torn_env"] = "a" * 32
    env = envelope("lena@example.com", ["mike@example.org"], "torn")
    r.hsetnx(prefix + roles["torn_env"], "envelope", pickle.dumps(env, pickle.HIGHEST_PROTOCOL))
    roles["torn_meta"] = "b" * 32
    r.hset(prefix + roles["torn_meta"], mapping={"timestamp": NOW, "attempts": 0})
    roles["wrong_type"] = "strange"
    r.set(prefix + roles["wrong_type"], "not a hash")
    out["load_error"] = load_error(store)  # before the hostile values: slimta would run them
    roles["hostile_env"] = "f" * 32
    r.hset(prefix + roles["hostile_env"], mapping={
        "envelope": pickle.dumps(Hostile(), pickle.HIGHEST_PROTOCOL),
        "timestamp": NOW, "attempts": 0})  # fmt: skip
    roles["dangling"] = "d" * 32
    r.rpush(store.queue_key, pickle.dumps((NOW - 3600, roles["dangling"]), 5))
    roles["hostile_entry"] = "hostile"
    r.rpush(store.queue_key, pickle.dumps(Hostile(), pickle.HIGHEST_PROTOCOL))
    out["partial_delivered_indexes"] = repr(
        pickle.loads(r.hget(prefix + roles["partial"], "delivered_indexes") or pickle.dumps(None))
    )
    out["hostile_payload_ran"] = os.path.exists(MARKER)
    return out


def write_pickles(out_dir):
    """Envelope pickles as slimta's cloud storage uploads them (HIGHEST_PROTOCOL)."""
    made = {}
    for role, env in (
        ("fresh", envelope("alice@example.com", ["bob@example.org"], "fresh")),
        ("old", envelope("carol@example.com", ["dave@example.org"], "old", NOW - 30 * DAY)),
    ):
        path = os.path.join(out_dir, role + ".pickle")
        with open(path, "wb") as f:
            f.write(pickle.dumps(env, pickle.HIGHEST_PROTOCOL))
        made[role] = {"path": path, "arrival": env.timestamp}
    path = os.path.join(out_dir, "hostile.pickle")
    with open(path, "wb") as f:
        f.write(pickle.dumps(Hostile(), pickle.HIGHEST_PROTOCOL))
    made["hostile"] = {"path": path, "arrival": None}
    return {"pickles": made, "now": NOW}


def main(argv):
    kind = argv[1]
    if kind == "disk":
        out = write_disk(*argv[2:5])
    elif kind == "redis":
        out = write_redis(*argv[2:5])
    elif kind == "pickles":
        out = write_pickles(argv[2])
    else:
        raise SystemExit(f"unknown store kind {kind!r}")
    out["now"] = NOW
    json.dump(out, sys.stdout, indent=2, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv)
