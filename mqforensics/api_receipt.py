"""The erasure receipt's API (docs/receipts.md): what ``mqforensics receipt make | verify |
keygen`` call, and what a notebook calls.

    import mqforensics
    made = mqforensics.receipt("plan", after="after-audit", out="receipt")  # key from the env
    made                                          # the summary; in a notebook, the page
    mqforensics.verify_receipt("receipt/RECEIPT.json", public_key="receipt-key.pub")

The private key is never a value: ``signing_key=`` names a file, else ``MQF_RECEIPT_KEY`` (the
key's text) or ``MQF_RECEIPT_KEY_FILE`` is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqforensics import systems
from mqforensics.errors import ConfigError
from mqforensics.retention import receipt as receipts
from mqforensics.retention.manifest import Plan as PlanFiles
from mqforensics.retention.manifest import read_plan
from mqforensics.retention.receipt import Verification

__all__ = ["Receipt", "Verification", "receipt", "receipt_keygen", "verify_receipt"]


@dataclass(frozen=True, repr=False)
class Receipt:
    """A signed receipt written to `directory` (``RECEIPT.json``, ``RECEIPT.html``)."""

    directory: Path
    document: dict[str, Any]

    @property
    def json_path(self) -> Path:
        return self.directory / receipts.RECEIPT_JSON

    @property
    def html_path(self) -> Path:
        return self.directory / receipts.RECEIPT_HTML

    @property
    def key_fingerprint(self) -> str:
        return str(self.document["signature"]["key_fingerprint"])

    @property
    def clean(self) -> bool:
        """Whether the after-purge audit found none of the subjects of any request."""
        return all(r["after"]["clean"] for r in self.document["requests"])

    def summary(self) -> str:
        from mqforensics.views.receipt_page import render_text

        return render_text(self.document)

    def verify(self, *, public_key: str | Path | None = None) -> Verification:
        return verify_receipt(self.json_path, public_key=public_key)

    def __repr__(self) -> str:
        return f"receipt {self.json_path}:\n{self.summary()}"

    def _repr_html_(self) -> str:
        return self.html_path.read_text(encoding="utf-8")


def receipt(
    plan: str | Path | Any,
    *,
    after: str | Path,
    out: str | Path,
    policy: str | Path | None = None,
    signing_key: str | Path | None = None,
    journal: str | Path | None = None,
    before: str | Path | None = None,
) -> Receipt:
    """The signed erasure receipt of an applied plan (a directory, or an `api.Plan`), written
    to `out` (which must not exist, or be empty). `after`: an audit of the same stores with
    the plan's erasure policy, made after the purge. `policy`: the plan's policy file (default:
    the path the plan records; its SHA-256 must be the plan's). `signing_key`: a key file
    (PEM or raw); default ``MQF_RECEIPT_KEY`` / ``MQF_RECEIPT_KEY_FILE``. `journal`, `before`:
    the purge journal and the plan's audit, when not where the plan says."""
    from mqforensics.views.receipt_page import render_html

    key = receipts.signing_key(signing_key)  # first: no key, nothing read
    if out is None:
        raise ConfigError("--out DIR is required (out= in Python)")
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(f"{target} already exists and is not empty: choose another --out")
    directory = Path(getattr(plan, "directory", plan))
    files: PlanFiles = read_plan(directory)
    policy_path = Path(policy) if policy is not None else Path(files.header["policy"]["path"])
    loaded = systems.load_policy(policy_path)
    hide = systems.get(files.system).hide_target if files.system in systems.names() else None
    body = receipts.make_receipt(
        directory, after, policy=loaded, before_audit_dir=before, journal=journal,
        hide_target=hide,
    )  # fmt: skip
    document = receipts.sign(body, key)
    receipts.write_receipt(target, document, render_html(document))
    return Receipt(target, document)


def verify_receipt(path: str | Path, *, public_key: str | Path | None = None) -> Verification:
    """Check a ``RECEIPT.json`` (a receipt directory names its ``RECEIPT.json``): structure,
    counts, signature, layout, and the pinned `public_key` file when given. The result is
    truthy when it verifies; `problem` says what does not."""
    target = Path(path)
    if target.is_dir():
        target = target / receipts.RECEIPT_JSON
    return receipts.verify(target, public_key)


def receipt_keygen(out: str | Path) -> str:
    """A new Ed25519 signing key at `out` (PEM, mode 0600) and its public key at
    ``<out>.pub``; returns the public key's fingerprint."""
    return receipts.write_new_key(out)
