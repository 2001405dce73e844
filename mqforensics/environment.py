"""Environment variables set for a while and then put back as they were."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def variables_set(values: Mapping[str, str | None]) -> Iterator[None]:
    """Within: each variable of `values` set to its value (None: unset); after, each as it was
    before (unset if it was)."""
    before = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            _put(name, value)
        yield
    finally:
        for name, value in before.items():
            _put(name, value)


def _put(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
