"""The James generator's Parquet snapshot written a chunk at a time with numpy and pyarrow.

`write_parquet` writes the same tables as `generate.write_parquet` (the row-by-row reference)
for the same spec: the same rows, values and part files, checked by
tests/unit/james/test_generate_columnar.py. Only the blob inventory is laid out differently:
one part per chunk, in row order, instead of one file sorted by key, so memory stays flat at any
size. The numpy-drawn columns are shared with the reference (`generate._draw_chunk`); the rest of
each row comes from a `random.Random` whose draw count depends on the values drawn, replayed by
a small C kernel (``draws.c``) from that generator's state. Without the kernel (no compiler,
``MQF_NATIVE=off``), for deduplication blobs, or when blob files are wanted, it calls the
reference. Chunks are independent (each has its own seeds), so `workers` processes write them.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from datasets.james import generate as gen
from mqforensics import native

HERE = Path(__file__).resolve().parent
_U8 = np.ctypeslib.ndpointer(dtype=np.uint8, flags="C_CONTIGUOUS")
_U32 = np.ctypeslib.ndpointer(dtype=np.uint32, flags="C_CONTIGUOUS")
KERNEL = native.Kernel(
    "james_draws",
    (HERE / "draws.c",),
    {
        "mqf_james_rows": (
            ctypes.c_int,
            [_U32, ctypes.c_int64, _U8, *[ctypes.c_int32] * 7, _U8, _U8, _U32],
        )
    },
)
# Byte offsets of a row's fields in the kernel's output (draws.c, enum of F_*).
F_RECIPIENTS, F_HOST, F_AUTH, F_HEADER, F_STATE = 0, 7, 8, 9, 10
F_SENDER_USER, F_SENDER_DOMAIN, F_LAST_UPDATED, F_SUBJECT, F_BODY = 11, 12, 13, 14, 15
ORIGIN_KEY = "org.apache.james.rrt.Origin"
ORIGIN_VALUE = b'{"serializer":"StringSerializer","value":"smtp"}'
AUTH_KEY = "AuthenticatedUser"
ADDRESSES = [f"{u}@{d}" for u in gen._USERS for d in gen._DOMAINS]  # user * len(domains) + domain


def unavailable(spec: gen.GenerationSpec, blob_files: bool) -> str | None:
    """Why `write_parquet` would call the reference for this spec, or None."""
    if spec.blob_strategy != "passthrough":
        return "deduplication blob ids hash every row's content: the reference writes them"
    if blob_files:
        return "blob files are written by the reference"
    return native.unavailable(KERNEL)


@dataclass
class _Draws:
    """The kernel's per-row draws of one chunk."""

    fields: np.ndarray  # (n, 16) uint8, see F_*
    keys: np.ndarray  # (n, 32) uint8: header then body blob uuid bytes
    message_ids: np.ndarray  # uint32, where the header was drawn


def _replay(seed_text: str, n: int, with_blobs: np.ndarray, queue: str) -> _Draws:
    library = native.load(KERNEL)
    assert library is not None
    state = np.array(random.Random(seed_text).getstate()[1], dtype=np.uint32)
    fields = np.empty((n, 16), dtype=np.uint8)
    keys = np.empty((n, 32), dtype=np.uint8)
    message_ids = np.empty(n, dtype=np.uint32)
    states = gen._STATES.get(queue, ["root"])
    status = library.mqf_james_rows(
        state, n, np.ascontiguousarray(with_blobs, dtype=np.uint8), int(queue == "bounces"),
        len(gen._USERS), len(gen._DOMAINS), len(gen._HOSTS), len(states), len(gen._SUBJECTS),
        len(gen._BODIES), fields, keys, message_ids,
    )  # fmt: skip
    if status != 0:
        raise RuntimeError("mqf_james_rows refused its arguments")
    return _Draws(fields, keys, message_ids)


def _fixed_strings(codes: np.ndarray) -> pa.Array:
    """A string array of equal-width ASCII values given as an (n, width) uint8 array."""
    n, width = codes.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    data = np.ascontiguousarray(codes).tobytes()
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))


# Byte b -> its two lower-case hex digits, as one little-endian uint16.
_HEX_PAIRS = np.array(
    [ord("0123456789abcdef"[b >> 4]) | ord("0123456789abcdef"[b & 15]) << 8 for b in range(256)],
    dtype=np.uint16,
)
_UUID_DIGITS = [i for i in range(36) if i not in (8, 13, 18, 23)]


def _uuid_codes(raw: np.ndarray) -> np.ndarray:
    """str(uuid.UUID(bytes=...)) of each row of an (n, 16) uint8 array, as (n, 36) codes."""
    digits = _HEX_PAIRS[raw].view(np.uint8)
    out = np.full((raw.shape[0], 36), ord("-"), dtype=np.uint8)
    out[:, _UUID_DIGITS] = digits
    return out


def _constant(value: Any, n: int, kind: pa.DataType) -> pa.Array:
    if value is None:
        return pa.nulls(n, type=kind)
    return pa.array([value], type=kind).take(pa.array(np.zeros(n, dtype=np.int32)))


def _offsets(counts: np.ndarray) -> pa.Array:
    return pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))


def _entries(
    q: gen._Queue, drawn: gen._Drawn, d: _Draws, schema: pa.Schema
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The chunk's view rows (the reference's `_normal_chunk` and `_base_row`), and the
    address index of each row's recipients and sender."""
    n = len(drawn.t_ms)
    f = d.fields.astype(np.int64)
    domains = len(gen._DOMAINS)
    addresses = pa.array(ADDRESSES, type=pa.string())
    count = f[:, F_RECIPIENTS]
    recipient = f[:, 1:7:2] * domains + f[:, 2:7:2]  # (n, 3): user * domains + domain
    present = np.arange(3)[None, :] < count[:, None]
    recipients = pa.ListArray.from_arrays(_offsets(count), addresses.take(recipient[present]))
    bounce = q.name == "bounces"
    sender_index = f[:, F_SENDER_USER] * domains + f[:, F_SENDER_DOMAIN]
    sender = pa.nulls(n, pa.string()) if bounce else addresses.take(sender_index)
    auth = f[:, F_AUTH].astype(bool)
    entries = 1 + auth.astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(entries)[:-1]])
    key_index = np.zeros(int(entries.sum()), dtype=np.int64)
    key_index[starts[auth] + 1] = 1
    value_index = np.zeros_like(key_index)
    value_index[starts[auth] + 1] = 1 + recipient[auth, 0]
    auth_values = [
        b'{"serializer":"StringSerializer","value":"%s"}' % a.encode() for a in ADDRESSES
    ]
    attributes = pa.MapArray.from_arrays(
        _offsets(entries),
        pa.array([ORIGIN_KEY, AUTH_KEY], type=pa.string()).take(key_index),
        pa.array([ORIGIN_VALUE, *auth_values], type=pa.binary()).take(value_index),
        type=schema.field("attributes").type,
    )
    header = f[:, F_HEADER].astype(bool)
    delivered = addresses.take(recipient[header, 0])
    triples = pa.StructArray.from_arrays(
        [delivered, _constant("Delivered-To", int(header.sum()), pa.string()), delivered],
        fields=list(schema.field("perrecipientspecificheaders").type.value_type),
    )
    headers = pa.ListArray.from_arrays(
        _offsets(header.astype(np.int64)),
        triples,
        type=schema.field("perrecipientspecificheaders").type,
    )
    hosts = f[:, F_HOST]
    ts = schema.field("enqueuedtime").type
    states = gen._STATES.get(q.name, ["root"])
    keys = d.keys
    columns = {
        "queuename": _constant(q.name, n, pa.string()),
        "timerangestart": pa.array(drawn.trs * 1_000_000, type=ts),
        "bucketid": pa.array(drawn.buckets.astype(np.int32)),
        "enqueueid": _fixed_strings(_uuid_codes(drawn.ids)),
        "enqueuedtime": pa.array(drawn.t_ms * 1000, type=ts),
        "name": _fixed_strings(drawn.names),
        "state": pa.array(states, type=pa.string()).take(f[:, F_STATE]),
        "headerblobid": _fixed_strings(_uuid_codes(keys[:, :16])),
        "bodyblobid": _fixed_strings(_uuid_codes(keys[:, 16:])),
        "attributes": attributes,
        "errormessage": _constant(
            "550 5.1.1 mailbox unavailable" if bounce else None, n, pa.string()
        ),
        "sender": sender,
        "recipients": recipients,
        "remotehost": pa.array([h[0] for h in gen._HOSTS]).take(hosts),
        "remoteaddr": pa.array([h[1] for h in gen._HOSTS]).take(hosts),
        "lastupdated": pa.array((drawn.t_ms - f[:, F_LAST_UPDATED]) * 1000, type=ts),
        "perrecipientspecificheaders": headers,
    }
    table = pa.Table.from_arrays([columns[c.name] for c in schema], schema=schema)
    return table, recipient, sender_index


def _inventory(
    q: gen._Queue,
    drawn: gen._Drawn,
    d: _Draws,
    rows: np.ndarray,
    recipient: np.ndarray,
    sender: np.ndarray,
) -> list[tuple[str, int, int, str]]:
    """(key, size, last_modified ms, md5) of the header and body objects of `rows`."""
    out = []
    bounce = q.name == "bounces"
    joined = drawn.names[rows].tobytes().decode("ascii")
    ids = _uuid_codes(drawn.ids[rows]).tobytes().decode("ascii")
    keys = _uuid_codes(d.keys[rows].reshape(-1, 16)).tobytes().decode("ascii")
    for j, i in enumerate(rows.tolist()):
        f = d.fields[i]
        host = gen._HOSTS[f[F_HOST]]
        to = [ADDRESSES[a] for a in recipient[i, : f[F_RECIPIENTS]].tolist()]
        t_ms = int(drawn.t_ms[i])
        header = gen.header_text(
            joined[38 * j : 38 * j + 38],
            None if bounce else ADDRESSES[sender[i]],
            to,
            host,
            t_ms,
            int(d.message_ids[i]),
            int(f[F_SUBJECT]),
        )
        body = gen._body_bytes(int(f[F_BODY]), ids[36 * j : 36 * j + 36])
        for k, content in enumerate((header, body)):
            key = keys[72 * j + 36 * k : 72 * j + 36 * k + 36]
            out.append((key, len(content), t_ms - 40, hashlib.md5(content).hexdigest()))
    return out


def _inventory_table(rows: list[tuple[str, int, int, str]], schema: pa.Schema) -> pa.Table:
    n = len(rows)
    ms = np.array([r[2] for r in rows], dtype=np.int64)
    return pa.Table.from_arrays(
        [
            _constant(gen.BLOB_BUCKET, n, pa.string()),
            pa.array([r[0] for r in rows], type=pa.string()),
            pa.array([r[1] for r in rows], type=pa.int64()),
            pa.array(ms * 1000, type=schema.field("last_modified").type),
            pa.array([r[3] for r in rows], type=pa.string()),
            _constant("STANDARD", n, pa.string()),
        ],
        schema=schema,
    )


_plan_of_worker: Any = None


def _set_plan(plan: Any) -> None:
    global _plan_of_worker
    _plan_of_worker = plan


def _write_chunk(
    out: Path, index: int, queue: int, chunk: int, start: int, n: int, blobs: bool
) -> None:
    plan = _plan_of_worker
    spec = plan.spec
    q = plan.queues[queue]
    schemas = gen._arrow_schemas()
    drawn = gen._draw_chunk(plan, q, chunk, start, n)
    with_blobs = drawn.live & blobs
    d = _replay(f"james-{spec.seed}-{q.index}-{chunk}", n, with_blobs, q.name)
    table, recipient, sender = _entries(q, drawn, d, schemas["entries"])
    gen._write_part(out, f"enqueuedmails{spec.table_version}", index, table)
    consumed = ~drawn.live
    if consumed.any():
        deleted = pa.Table.from_arrays(
            [
                _constant(q.name, int(consumed.sum()), pa.string()),
                table.column("enqueueid").filter(pa.array(consumed)),
            ],
            schema=schemas["deleted"],
        )
        gen._write_part(out, "deletedmailsv2", index, deleted)
    rows = np.flatnonzero(with_blobs)
    if len(rows):
        inventory = _inventory(q, drawn, d, rows, recipient, sender)
        table = _inventory_table(inventory, schemas["blob_inventory"])
        gen._write_part(out, "blob_inventory", index, table)


def write_parquet(
    spec: gen.GenerationSpec,
    directory: str | os.PathLike[str],
    *,
    blobs: bool = True,
    blob_files: bool = True,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """`generate.write_parquet`, vectorised (see the module's docstring); `workers` processes
    write the chunks. Returns the ground truth."""
    if unavailable(spec, blob_files) is not None:
        return gen.write_parquet(spec, directory, blobs=blobs, blob_files=blob_files)
    plan = gen._plan(spec)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    size = max(1, spec.chunk_size)
    tasks = []
    for q in plan.queues:
        for chunk, start in enumerate(range(0, q.normal_count, size)):
            tasks.append((q.index, chunk, start, min(size, q.normal_count - start)))
    arguments = [(out, index, *task, blobs) for index, task in enumerate(tasks)]
    if workers > 1:
        # pyarrow's first `take` imports pandas (about a second): once here, before the
        # workers are forked, rather than in each of them.
        _constant("", 1, pa.string())
        with ProcessPoolExecutor(workers, initializer=_set_plan, initargs=(plan,)) as pool:
            for done in [pool.submit(_write_chunk, *a) for a in arguments]:
                done.result()
    else:
        _set_plan(plan)
        for a in arguments:
            _write_chunk(*a)
    _write_rest(plan, out, len(tasks), blobs)
    truth = gen._findings(plan, with_blobs=blobs)
    planted = gen._annotate(plan, truth)
    if not blobs:
        planted = [p for p in planted if "blob" not in p["anomaly"]]
    gen._write_truth(out, spec, truth, planted)
    return truth


def _write_rest(plan: Any, out: Path, index: int, blobs: bool) -> None:
    """The planted rows (the reference's last chunk), the small tables and snapshot.json."""
    spec = plan.spec
    schemas = gen._arrow_schemas()
    planted = gen._rows_to_columns(plan.planted_rows)
    if planted["queuename"]:
        table = gen._entries_table(planted, schemas["entries"])
        gen._write_part(out, f"enqueuedmails{spec.table_version}", index, table)
    if plan.planted_deleted:
        table = pa.Table.from_pylist(plan.planted_deleted, schema=schemas["deleted"])
        gen._write_part(out, "deletedmailsv2", index, table)
    if blobs:
        rows = [
            (key, len(content), ms, hashlib.md5(content).hexdigest())
            for key, (content, ms) in sorted(plan.planted_blobs.items())
        ]
        gen._write_part(
            out, "blob_inventory", index, _inventory_table(rows, schemas["blob_inventory"])
        )
    gen.write_small_tables(out, plan, spec, schemas)
    as_of = gen._ms_to_dt(plan.T * 1000).strftime("%Y-%m-%dT%H:%M:%SZ")
    (out / "snapshot.json").write_text(json.dumps({"taken_at": as_of}) + "\n")
