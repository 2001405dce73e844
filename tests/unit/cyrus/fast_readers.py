"""What the fast-reader tests compare: a reader's whole answer, and whether a kernel reader gave
the reference's and took the file itself (rather than handing it to the reference)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mqforensics.errors import InputError


def answer(read: Callable[..., Any], data: bytes, history: bool, name: str = "f.db") -> tuple:
    """Everything `read` says of `data`: header, problems, records, history, items, whether
    complete, the source's name; or the InputError's text."""
    try:
        parsed = read(data, history=history, name=name)
    except InputError as exc:
        return ("InputError", str(exc))
    return (
        parsed.header,
        parsed.problems,
        list(parsed.records),
        list(parsed.history),
        list(parsed.items()),
        parsed.complete,
        parsed.source,
    )


def same_as_reference(
    fast: Callable[..., Any], reference: Callable[..., Any], took: type, data: bytes, history: bool
) -> bool:
    """Assert `fast` answers as `reference` does; whether it read the file itself (its result
    is a `took`)."""
    mine = answer(fast, data, history)
    assert mine == answer(reference, data, history)
    if mine[0] == "InputError":
        return False
    return isinstance(fast(data, history=history), took)
