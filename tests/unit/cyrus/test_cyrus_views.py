"""Cyrus's notebook hooks (``SPEC.views``): the sharing edges and the sharing explorer."""

from __future__ import annotations

from pathlib import Path

from mqforensics.privacy import pseudonymize_address
from mqforensics.systems.cyrus import database, dbchecks, pseudonyms, views

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "cyrus" / "sample"


def _sharing_rows() -> list[dict]:
    db = database.read_database(SAMPLE / "backend1" / "mailboxes.db")
    return dbchecks.sharing_report(db.entries, dbchecks.DEFAULT_ADMINS, "example.org")


def test_sharing_edges_group_grants_and_hide_identities() -> None:
    rows = _sharing_rows()
    edges = views.cyrus_sharing_edges(rows, reveal=True)
    pairs = {((r["owner"] or "(shared)"), r["grantee"]) for r in rows}
    assert set(zip(edges["owner"], edges["grantee"], strict=True)) == pairs
    for edge in edges.itertuples():
        mine = [
            r
            for r in rows
            if (r["owner"] or "(shared)") == edge.owner and r["grantee"] == edge.grantee
        ]
        assert edge.mailboxes == len({r["mailbox"] for r in mine})
    hidden = views.cyrus_sharing_edges(rows)
    text = hidden.to_string()
    assert "bob" not in text and "alice" not in text
    assert pseudonymize_address("bob") in set(hidden["grantee"]) | set(hidden["owner"])
    assert len(hidden) == len(edges)
    # The rows `audit cyrus` writes to sharing.json are already hidden: not re-hashed.
    already = [pseudonyms.sharing_row(r, list(dbchecks.DEFAULT_ADMINS)) for r in rows]
    assert views.cyrus_sharing_edges(already).equals(hidden)


def test_sharing_edges_of_the_audits_frames(spark) -> None:
    from mqforensics.systems.cyrus import fleet

    paths = [SAMPLE / "backend1" / "mailboxes.db", SAMPLE / "backend2" / "mailboxes.show"]
    frames = fleet.read_fleet(spark, paths, admins=["cyrus"], default_domain="example.org")
    edges = views.cyrus_sharing_edges(frames, reveal=True)
    assert set(edges["files"]) == {2}  # both backends hold every grant
    assert edges.drop(columns="files").equals(
        views.cyrus_sharing_edges(_sharing_rows(), reveal=True).drop(columns="files")
    )


def test_sharing_explorer_focuses_on_the_picked_identity() -> None:
    rows = _sharing_rows()
    explorer = views.SharingExplorer(rows)
    assert explorer.identity.value == views.EVERYONE
    bob = pseudonymize_address("bob")
    assert bob in explorer.identity.options and "bob" not in explorer.identity.options
    explorer.identity.value = bob
    assert explorer.selection() == {"identity": bob}
    assert explorer.figure().axes[0].get_title().startswith(f"Who can see whose mailboxes: {bob}")
    # The caption lists bob's edges only: as many as the report has (owner, grantee) pairs with bob.
    pairs = {(r["owner"], r["grantee"]) for r in rows if "bob" in (r["owner"], r["grantee"])}
    assert explorer.caption_html().count("</tr>") == 1 + len(pairs)  # header + one per edge
    assert f"identity={bob}" in explorer._repr_mimebundle_()["text/plain"]
    assert views.SharingExplorer is type(explorer)  # built once
