"""Make the bundled Cyrus sample: two backends' `mailboxes.db`, one with planted RACL damage.

    .venv/bin/python datasets/cyrus/make_sample.py

writes ``datasets/cyrus/sample/`` from the real fixtures that `make_fixtures.py` made with Cyrus
3.6's own tools (``tests/data/cyrus/``):

- ``backend1/mailboxes.db``: the twoskip file Cyrus wrote, as it is (cross-domain and ``anyone``
  shares, a negative right, a tombstone, superseded records in its history).
- ``backend2/mailboxes.show``: the same database as ``cyr_dbtool ... twoskip show`` printed it,
  with two planted RACL faults, as after a crash between a mailbox write and its RACL update:
  bob's reverse-ACL key for ``user.alice`` is gone (``racl_missing``), and a reverse-ACL key for
  a grant that no mailbox holds was left behind (``racl_stale``).

``ANOMALIES.md`` lists what each file must produce.
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent.parent / "tests" / "data" / "cyrus"
SAMPLE = HERE / "sample"

# Key and value are separated by a TAB in `show` output; a RACL key's value is empty.
MISSING = b"AU\x1ebob\x1euser\x1falice\t\n"
STALE = b"AU\x1ezoe\x1eshared\x1fteam\t\n"


def main() -> None:
    (SAMPLE / "backend1").mkdir(parents=True, exist_ok=True)
    (SAMPLE / "backend2").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / "mailboxes_twoskip.db", SAMPLE / "backend1" / "mailboxes.db")
    show = (FIXTURES / "mailboxes_twoskip.show").read_bytes()
    if MISSING not in show or STALE in show:
        raise SystemExit("the fixture's show dump is not the one this script expects")
    lines = show.replace(MISSING, b"").splitlines(keepends=True)
    lines.append(STALE)
    (SAMPLE / "backend2" / "mailboxes.show").write_bytes(b"".join(sorted(lines)))
    print(f"wrote {SAMPLE}")


if __name__ == "__main__":
    main()
