"""What notebooks and reports draw of a Cyrus audit (``SPEC.views``): renderings only.

- `cyrus_sharing_edges`: the sharing report reduced to one row per (owner, grantee).
- `SharingExplorer`: an ipywidgets explorer of that graph, for everyone or one identity.

Importing this module imports neither pandas nor ipywidgets (the CLI imports every spec):
`cyrus_sharing_edges` imports pandas when called, and `SharingExplorer` is built on first use.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mqforensics.systems.cyrus import dbchecks, pseudonyms

if TYPE_CHECKING:
    import pandas as pd

EVERYONE = "(everyone)"
EDGE_COLUMNS = ["owner", "grantee", "rights", "mailboxes", "files"]


def _sharing_of(sharing: Any) -> tuple[Any, Sequence[str]]:
    """The sharing rows of `sharing` (the audit's frames, a frame, pandas or rows) and the
    admins to keep when pseudonymising."""
    frame = getattr(sharing, "sharing", None)
    if frame is not None and hasattr(sharing, "admins"):  # frames.CyrusFrames
        return frame, list(sharing.admins)
    return sharing, list(dbchecks.DEFAULT_ADMINS)


def cyrus_sharing_edges(sharing: Any, *, reveal: bool = False) -> pd.DataFrame:
    """One row per (owner, grantee) of the sharing report (the audit's `frames.CyrusFrames`, its
    ``sharing`` frame, `dbchecks.sharing_report` rows or ``sharing.json``): the rights granted
    (distinct, sorted, negative ones prefixed with ``-``), the number of mailboxes and files.
    Identities are pseudonymised unless `reveal`, as ``audit cyrus`` does (already
    pseudonymised rows stay as they are)."""
    import pandas as pd

    rows, admins = _sharing_of(sharing)
    if hasattr(rows, "toPandas"):
        table = rows.toPandas()
    elif isinstance(rows, pd.DataFrame):
        table = rows.copy()
    else:
        table = pd.DataFrame([dict(r) for r in rows])
    if table.empty:
        return pd.DataFrame(columns=EDGE_COLUMNS)
    if not reveal:
        records = table.astype(object).where(table.notna(), None).to_dict("records")
        table = pd.DataFrame([pseudonyms.sharing_row(r, admins) for r in records])
    table["owner"] = table["owner"].fillna("(shared)")
    if "negative" in table:
        table["right"] = table["rights"].where(
            ~table["negative"].astype(bool), "-" + table["rights"]
        )
    else:
        table["right"] = table["rights"]
    if "file" not in table:
        table["file"] = ""
    grouped = table.groupby(["owner", "grantee"], sort=True).agg(
        rights=("right", lambda v: " ".join(sorted(set(v)))),
        mailboxes=("mailbox", "nunique"),
        files=("file", "nunique"),
    )
    return grouped.reset_index()[EDGE_COLUMNS]


@functools.cache
def _explorer_class() -> type:
    """`SharingExplorer`, defined on first use (it subclasses the ipywidgets `Explorer`)."""
    from mqforensics.views import plots
    from mqforensics.views.widgets import Explorer, table_html

    class SharingExplorer(Explorer):
        """The sharing graph of the Cyrus sharing report, for everyone or one identity."""

        def __init__(self, sharing: Any, *, reveal: bool = False) -> None:
            import ipywidgets

            self.edges = cyrus_sharing_edges(sharing, reveal=reveal)
            identities = sorted(set(self.edges["owner"]) | set(self.edges["grantee"]))
            options = [EVERYONE, *identities]
            self.identity = ipywidgets.Dropdown(
                options=options, value=EVERYONE, description="identity"
            )
            super().__init__([self.identity], "Who can see whose mailboxes")

        def selection(self) -> dict[str, Any]:
            return {"identity": self.identity.value}

        def figure(self) -> Any:
            focus = self.identity.value
            return plots.sharing_graph(self.edges, focus=None if focus == EVERYONE else focus)

        def caption_html(self) -> str:
            focus = self.identity.value
            rows = self.edges
            if focus != EVERYONE:
                rows = rows[(rows["owner"] == focus) | (rows["grantee"] == focus)]
            return table_html(rows, classes="mqf-sharing")

    SharingExplorer.__module__ = __name__
    return SharingExplorer


def __getattr__(name: str) -> Any:
    if name == "SharingExplorer":
        return _explorer_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
