"""The ``COPY ... TO`` options a cqlsh CSV export was written with, from its sidecar file.

cqlsh writes no record of the options it was given, and a reader cannot tell ``|``-separated
fields or a ``NULL='<null>'`` export from damage. An operator who exported with options other
than the defaults records them in ``cqlsh_copy.json`` beside the CSV files, exactly as given to
cqlsh (names in any case, values as strings)::

    {"DELIMITER": "|", "NULL": "<null>", "DATETIMEFORMAT": "%Y-%m-%dT%H:%M:%S%z"}

They apply to every CSV table of the directory. The facts come from cqlshlib ``copyutil.py``
(``parse_options``, ``ExportWriter``) and ``formatting.py``:

- ``DELIMITER``, ``QUOTE``, ``ESCAPE``: the CSV dialect, one character each; a ``QUOTE`` equal
  to ``ESCAPE`` means quotes are doubled (``doublequote``), as cqlsh does.
- ``NULL``: the text written for a null (default empty). With another value, an empty field of
  a text column is the empty string, which the default export cannot tell from null.
- ``DATETIMEFORMAT``: the ``strftime`` format of timestamps (default
  ``%Y-%m-%d %H:%M:%S.%f%z``; COPY TO writes ``%f`` as three digits, milliseconds); it must
  hold ``%z``, since without an offset a reader would have to guess the time zone cqlsh
  displayed in.
- ``THOUSANDSSEP``: the separator cqlsh groups integers with (default none).
- ``ENCODING`` (``utf8`` only) and ``HEADER`` (``true`` only: the header names the columns).
- ``DECIMALSEP``, ``BOOLSTYLE``, ``FLOATPRECISION``, ``DOUBLEPRECISION``: no James table has
  such a column; accepted and without effect. So are the options that change how cqlsh reads,
  not what it writes (``MAXOUTPUTSIZE``, ``PAGESIZE``, ``PAGETIMEOUT``, ``MAXREQUESTS``,
  ``MAXATTEMPTS``, ``NUMPROCESSES``, ``REPORTFREQUENCY``, ``RATEFILE``).
- ``BEGINTOKEN``, ``ENDTOKEN`` and ``MAXROWS`` export part of a table: refused, since an audit
  of part of the view would call referenced blobs orphans.

Anything else, or a value out of these rules, is a ConfigError naming the file and the option.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError

SIDECAR = "cqlsh_copy.json"
DEFAULT_DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f%z"
_NO_EFFECT = {
    "decimalsep", "boolstyle", "floatprecision", "doubleprecision", "maxoutputsize", "pagesize",
    "pagetimeout", "maxrequests", "maxattempts", "numprocesses", "reportfrequency", "ratefile",
}  # fmt: skip
_PARTIAL = {"begintoken": "", "endtoken": "", "maxrows": "-1"}


@dataclass(frozen=True)
class CopyOptions:
    """What a cqlsh CSV export's bytes depend on (defaults: cqlsh's)."""

    delimiter: str = ","
    quote: str = '"'
    escape: str = "\\"
    null: str = ""
    datetime_format: str | None = None  # None: cqlsh's default
    thousands_sep: str = ""

    def dialect(self) -> dict[str, Any]:
        """The `csv` module's dialect cqlsh wrote with."""
        doubled = self.quote == self.escape
        dialect: dict[str, Any] = {
            "delimiter": self.delimiter,
            "quotechar": self.quote,
            "doublequote": doubled,
            "strict": True,
        }
        if not doubled:
            dialect["escapechar"] = self.escape
        return dialect

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> CopyOptions:
        return cls(**json.loads(text)) if text else cls()


def read_copy_options(directory: Path) -> CopyOptions:
    """The options of ``directory/cqlsh_copy.json``; cqlsh's defaults when there is none."""
    path = Path(directory) / SIDECAR
    if not path.exists():
        return CopyOptions()
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise ConfigError(f'{path}: expected an object of COPY options as strings, e.g. '
                          '{"DELIMITER": "|"}')  # fmt: skip
    options = {str(k).lower(): v for k, v in given.items()}
    values: dict[str, Any] = {}
    for name, value in options.items():
        where = f"{path}: {name.upper()}={value!r}"
        if name in ("delimiter", "quote", "escape"):
            if len(value) != 1:
                raise ConfigError(f"{where}: must be one character")
            values[name] = value
        elif name == "null":
            values["null"] = value
        elif name == "datetimeformat":
            if "%z" not in value:
                raise ConfigError(f"{where}: must hold %z (the UTC offset)")
            values["datetime_format"] = value
        elif name == "thousandssep":
            if len(value) > 1:
                raise ConfigError(f"{where}: must be one character or empty")
            values["thousands_sep"] = value
        elif name == "encoding":
            if value.lower().replace("-", "") != "utf8":
                raise ConfigError(f"{where}: only UTF-8 exports are read")
        elif name == "header":
            if value.lower() != "true":
                raise ConfigError(f"{where}: exports are read by their header (HEADER=true)")
        elif name in _PARTIAL:
            if value.strip() != _PARTIAL[name]:
                raise ConfigError(
                    f"{where}: the export holds part of the table; audit a whole export"
                )
        elif name not in _NO_EFFECT:
            raise ConfigError(f"{where}: not a cqlsh COPY TO option")
    copy = CopyOptions(**values)
    if copy.delimiter in (copy.quote, copy.escape):
        raise ConfigError(f"{path}: DELIMITER must differ from QUOTE and ESCAPE")
    return copy
