"""Writes datasets/sample/blobstore/: a small, deterministic local blob store for `make demo`.

Forty objects with random UUID keys, as a passthrough blob store names its objects, and sizes
drawn from a fixed seed (headers of a few hundred bytes, bodies of a few kilobytes). Run it again
to re-create the sample byte for byte: `python datasets/make_sample_blobstore.py`.
"""

from __future__ import annotations

import random
import shutil
import uuid
from pathlib import Path

TARGET = Path(__file__).parent / "sample" / "blobstore"
SEED = 20261121


def main() -> None:
    rng = random.Random(SEED)
    shutil.rmtree(TARGET, ignore_errors=True)
    TARGET.mkdir(parents=True)
    for index in range(40):
        key = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        size = rng.randint(200, 900) if index % 2 == 0 else rng.randint(2_000, 12_000)
        (TARGET / key).write_bytes(bytes(rng.getrandbits(8) for _ in range(size)))


if __name__ == "__main__":
    main()
