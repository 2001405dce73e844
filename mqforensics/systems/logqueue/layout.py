"""A queue directory's files: segments ``seg-<n>.lq``, the saved restart positions
``restart.lq`` (a segment numbered 0 holding one RESTART record, replaced atomically) and the
spool files under ``spool/``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqforensics.errors import InputError
from mqforensics.filenames import shown
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.segment import read_segment, segment_number_of

RESTART_FILE = "restart.lq"
SPOOL_DIR = "spool"


@dataclass(frozen=True)
class SavedPositions:
    suffix: tuple[int, int]
    runners: tuple[tuple[str, int, int], ...]


def encode_restart(
    suffix: tuple[int, int], runners: tuple[tuple[str, int, int], ...], time_us: int
) -> bytes:
    """The bytes of a ``restart.lq``: a segment header numbered 0 and one RESTART record."""
    values = {"positions": list(runners), "suffix_segment": suffix[0], "suffix_offset": suffix[1]}
    return fmt.encode_segment_header(0, time_us) + fmt.encode_record(
        fmt.RESTART, None, time_us, (0, 0), values
    )


def segments(directory: Path) -> dict[int, Path]:
    """Segment number → file, for every ``seg-<n>.lq`` in `directory`."""
    if not directory.is_dir():
        raise InputError(f"{shown(directory)}: not a queue directory")
    found = {}
    for path in directory.iterdir():
        number = segment_number_of(path.name)
        if number is not None and path.is_file():
            found[number] = path
    return dict(sorted(found.items()))


def saved_positions(directory: Path) -> SavedPositions | None:
    """The saved restart positions; None when ``restart.lq`` does not exist.

    A ``restart.lq`` that does not hold exactly one whole RESTART record is an `InputError`
    naming it: nothing may be decided from positions that cannot be read."""
    path = directory / RESTART_FILE
    if not path.exists():
        return None
    parsed = read_segment(path)
    restarts = [r for r in parsed.records if r.type == fmt.RESTART]
    if parsed.problems or len(restarts) != 1 or len(parsed.records) != 1:
        what = parsed.problems[0].kind if parsed.problems else f"{len(parsed.records)} records"
        raise InputError(f"{shown(path)}: not one whole RESTART record ({what})")
    values = restarts[0].values
    return SavedPositions(
        (values["suffix_segment"], values["suffix_offset"]),
        tuple((name, seg, off) for name, seg, off in values["positions"]),
    )
