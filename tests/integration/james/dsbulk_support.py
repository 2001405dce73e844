"""James tables unloaded by the real DSBulk (Maven Central jars) from the session's Cassandra."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mqforensics.services import dsbulk


def unload_tables(
    cassandra: dict, keyspace: str, tables: list[str], target: Path, fmt: str, *options: str
) -> Path:
    """Each table unloaded as `fmt` (``csv`` or ``json``) into ``target/<table>/``, the way an
    operator exports a snapshot; four DSBulk runs at a time (each mostly waits on the driver)."""
    target.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = [
            pool.submit(
                dsbulk.unload, cassandra, keyspace, table, target / table, "-c", fmt, *options
            )
            for table in tables
        ]
        for run in runs:
            run.result()
    return target
