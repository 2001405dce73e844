"""Erasure receipts: what an applied plan did for each erasure request, signed.

A receipt is made after ``purge --apply`` from files only: the plan directory (header, actions,
deferred items, ``approval.json``, the journal), the audit the plan was made from (its findings,
manifest and subject key) and a fresh audit of the same stores with the same erasure policy run
after the purge. For every ``erase_subject`` rule of the plan's policy that applies to the plan's
system it says: the request (rule, legal basis, search depth, the subjects as the plan's audit's
keyed hashes), who approved the plan and when, every store searched with its fingerprints, what
was found, what was deleted (each target with the content hashes its precondition recorded,
and the journal's outcome), what was deferred or skipped and why, what could not be searched,
and what the after-purge audit still finds of the subjects.

The body is signed with Ed25519 over its canonical JSON (sorted keys, no whitespace, UTF-8);
the signature, the public key and its fingerprint sit next to the body under ``signature``. The
file itself is written in one fixed layout (`serialise`), which `verify` also checks, so any
change of any byte of ``RECEIPT.json`` fails verification. No raw address is ever written:
every text goes through `privacy.pseudonymize_value` (targets through the system's
`hide_target` first), and subjects appear only as keyed hashes; a body holding a policy's
unkeyed subject hash is refused as a bug. docs/receipts.md says what a receipt proves.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from mqforensics import subjects
from mqforensics.audit_manifest import read_manifest
from mqforensics.errors import ConfigError, InputError, MqfError
from mqforensics.findings import read_findings
from mqforensics.privacy import pseudonymize_value
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import (
    JOURNAL,
    Plan,
    canonical_json,
    directory_written_whole,
    read_plan,
    require_approval,
    write_atomically,
)
from mqforensics.retention.policy import ERASE_SUBJECT, Policy
from mqforensics.units import parse_instant, utc_text
from mqforensics.version import __version__

FORMAT = "mqforensics-receipt/1"
RECEIPT_JSON = "RECEIPT.json"
RECEIPT_HTML = "RECEIPT.html"
KEY_VARIABLE = "MQF_RECEIPT_KEY"
KEY_FILE_VARIABLE = "MQF_RECEIPT_KEY_FILE"
ALGORITHM = "Ed25519"
NO_KEY = (
    f"no signing key: set {KEY_VARIABLE} (PEM or 64 hex digits) or {KEY_FILE_VARIABLE} "
    "(the path of a key file), or name a key file with the option --signing-key-file; "
    "`mqforensics receipt keygen --out FILE` makes one"
)
CLEAN = "subject found in none of the stores"
PERSONAL_DATA = subjects.CHECK
UNREADABLE = "unreadable_content"
_HEX64 = re.compile(r"[0-9a-f]{64}")

HideTarget = Callable[[dict[str, Any], str], dict[str, Any]]


# --- keys ----------------------------------------------------------------------------------------


def _crypto() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return ed25519


def private_key_from(data: bytes, where: str) -> Any:
    """An Ed25519 private key from PEM (PKCS#8), 32 raw bytes or 64 hex digits; an error
    naming `where` (never the key) otherwise."""
    return _key_from(data, where, private=True)


def public_key_from(data: bytes, where: str) -> Any:
    """An Ed25519 public key from PEM, 32 raw bytes or 64 hex digits (a private key's PEM gives
    its public key)."""
    if b"PRIVATE KEY-----" in data:
        return private_key_from(data, where).public_key()
    return _key_from(data, where, private=False)


def _key_from(data: bytes, where: str, *, private: bool) -> Any:
    """One Ed25519 key of either kind. A private key comes from configuration (a bad one is a
    ConfigError); a public key from the input being verified (an InputError)."""
    from cryptography.hazmat.primitives import serialization

    ed25519 = _crypto()
    error: type[MqfError]
    load: Callable[[bytes], Any]
    if private:
        kind, error, wanted = "private", ConfigError, ed25519.Ed25519PrivateKey
        load = partial(serialization.load_pem_private_key, password=None)
        from_raw = wanted.from_private_bytes
        unreadable = "not an unencrypted PEM private key"
    else:
        kind, error, wanted = "public", InputError, ed25519.Ed25519PublicKey
        load = serialization.load_pem_public_key
        from_raw = wanted.from_public_bytes
        unreadable = "not a PEM public key"
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        try:
            key = load(text)
        except (ValueError, TypeError):
            raise error(f"{where}: {unreadable}") from None
        if not isinstance(key, wanted):
            raise error(f"{where}: a PEM {kind} key, but not an Ed25519 one")
        return key
    raw = _raw32(data, text)
    if raw is None:
        raise error(f"{where}: not an Ed25519 {kind} key (PEM, 32 bytes or 64 hex digits)")
    return from_raw(raw)


def _raw32(data: bytes, text: bytes) -> bytes | None:
    if len(data) == 32:
        return data
    if re.fullmatch(rb"[0-9a-fA-F]{64}", text):
        return bytes.fromhex(text.decode())
    return None


def public_bytes(public: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def key_fingerprint(public: Any) -> str:
    """``sha256:`` and the SHA-256 of the 32 raw bytes of a public key."""
    return "sha256:" + hashlib.sha256(public_bytes(public)).hexdigest()


def signing_key(
    key_file: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Any:
    """The private key: `key_file`, else ``MQF_RECEIPT_KEY`` (the key's text), else
    ``MQF_RECEIPT_KEY_FILE``; a ConfigError (exit 2) naming the variables when none is given."""
    env = os.environ if environ is None else environ
    if key_file is not None:
        return private_key_from(_read_key_file(Path(key_file)), f"signing key {key_file}")
    text = env.get(KEY_VARIABLE, "")
    path = env.get(KEY_FILE_VARIABLE, "")
    if text.strip() and path.strip():
        raise ConfigError(f"both {KEY_VARIABLE} and {KEY_FILE_VARIABLE} are set: unset one")
    if text.strip():
        return private_key_from(text.encode(), KEY_VARIABLE)
    if path.strip():
        return private_key_from(_read_key_file(Path(path)), f"{KEY_FILE_VARIABLE} {path}")
    raise ConfigError(NO_KEY)


def _read_key_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"signing key {path} cannot be read ({exc.strerror or exc})") from None


def write_new_key(out: str | Path) -> str:
    """A new private key in PEM at `out` (mode 0600; an existing file is refused) and its
    public key at ``<out>.pub``; returns the public key's fingerprint."""
    from cryptography.hazmat.primitives import serialization

    out = Path(out)
    pub = out.with_name(out.name + ".pub")
    for path in (out, pub):
        if path.exists() or path.is_symlink():
            raise ConfigError(f"{path} exists: choose another --out (a key is never overwritten)")
    key = _crypto().Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise ConfigError(f"{out} cannot be created ({exc.strerror or exc})") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    public = key.public_key()
    pub.write_bytes(
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key_fingerprint(public)


# --- building ------------------------------------------------------------------------------------


def _key_id(key: bytes) -> str:
    """Names an audit's subject key without revealing it: a keyed hash of a fixed label."""
    return subjects.keyed("mqforensics subject key id", key)[:16]


def _stores(manifest: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    stores = {}
    for item in manifest.get("inputs") or ():
        if isinstance(item, dict):
            stores[(str(item.get("kind", "")), str(item.get("location", "")))] = item
    return stores


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _policy_sha256_of(manifest: dict[str, Any], where: Path) -> str:
    """The SHA-256 of the erasure policy an audit ran with: the manifest's record when it has
    one, else the file its options name, read now."""
    recorded = manifest.get("erasure_policy_sha256")
    if isinstance(recorded, str) and recorded:
        return recorded
    path = (manifest.get("options") or {}).get("erasure_policy")
    if not path:
        raise ConfigError(
            f"after-purge audit {where} was not run with --erasure-policy: audit the same "
            "stores again with the plan's policy"
        )
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(
            f"after-purge audit {where}: its erasure policy {path} cannot be read "
            f"({exc.strerror or exc}) to compare with the plan's"
        ) from None


def _journal_of(plan: Plan, journal: Path | None) -> tuple[Path, list[dict[str, Any]]]:
    path = journal if journal is not None else plan.directory / JOURNAL
    if not path.exists():
        raise ConfigError(
            f"plan {plan.directory} has no journal ({path}): a receipt is made after "
            f"`mqforensics purge {plan.directory} --apply`"
        )
    records = read_journal(path)
    if not records or records[0].get("plan_sha256") != plan.sha256:
        raise ConfigError(f"journal {path} is not the journal of plan {plan.directory}")
    if not any(r["event"] == "verified" for r in records):
        raise ConfigError(
            f"journal {path}: the purge has not finished (no verification record): run "
            f"`mqforensics purge {plan.directory} --apply` again"
        )
    return path, records


def _found_where(detail: dict[str, Any], wanted: set[str]) -> list[dict[str, str]]:
    found = detail.get("found")
    if not isinstance(found, list):
        return []
    return sorted(
        ({"subject": str(f["subject"]), "where": str(f["where"])}
         for f in found if isinstance(f, dict) and f.get("subject") in wanted),
        key=lambda f: (f["where"], f["subject"]),
    )  # fmt: skip


def _object(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "finding": str(row["id"]),
        "queue": _text(row.get("queue")),
        "object": _text(row.get("subject")),
        "bytes": int(row.get("bytes") or 0),
    }


def _unreadable(row: dict[str, Any]) -> dict[str, Any]:
    detail = row.get("detail") or {}
    places = detail.get("unreadable") if isinstance(detail, dict) else None
    return {
        **_object(row),
        "depth": _text(detail.get("depth")) if isinstance(detail, dict) else "",
        "unreadable": [
            {"where": _text(p.get("where")), "reason": _text(p.get("reason"))}
            for p in (places or ())
            if isinstance(p, dict)
        ],
    }


def _holding(rows: list[dict[str, Any]], wanted: set[str], show: Callable[[str], str]
             ) -> list[dict[str, Any]]:  # fmt: skip
    """The personal_data findings of `rows` naming a subject of `wanted`, subjects shown by
    `show` (the plan's audit's keyed hash)."""
    held = []
    for row in rows:
        if row.get("check") != PERSONAL_DATA:
            continue
        detail = row.get("detail") or {}
        named = set(detail.get("subjects") or ()) & wanted
        if not named:
            continue
        held.append(
            {
                **_object(row),
                "depth": _text(detail.get("depth")),
                "subjects": sorted(show(s) for s in named),
                "where": sorted(
                    (
                        {"subject": show(f["subject"]), "where": f["where"]}
                        for f in _found_where(detail, wanted)
                    ),
                    key=lambda f: (f["where"], f["subject"]),
                ),
            }
        )
    return sorted(held, key=lambda h: (h["queue"], h["object"], h["finding"]))


def _after_result(remaining: list[Any], unreadable: list[Any], depth: str) -> str:
    if remaining:
        return f"subject still found in {len(remaining)} object(s) of the stores (listed)"
    if unreadable:
        return (
            f"{CLEAN} at depth {depth}; {len(unreadable)} object(s) could not be searched at "
            "that depth (listed)"
        )
    return f"{CLEAN} (searched at depth {depth})"


def make_receipt(
    plan_dir: str | Path,
    after_audit_dir: str | Path,
    *,
    policy: Policy,
    before_audit_dir: str | Path | None = None,
    journal: str | Path | None = None,
    hide_target: HideTarget | None = None,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """The receipt's body (unsigned) for the applied plan at `plan_dir`.

    `policy` is the plan's policy (its SHA-256 must be the plan's); `before_audit_dir` defaults
    to the audit the plan records; `after_audit_dir` is an audit of the same stores with the
    same erasure policy, made after the purge finished. `hide_target` is the plan's system's
    (`System.hide_target`). Inputs that do not fit together are a ConfigError/InputError
    naming the file (nothing is written here)."""
    plan = read_plan(plan_dir)
    header = plan.header
    if policy.sha256 != header["policy"]["sha256"]:
        raise ConfigError(
            f"policy {policy.path} is not the plan's (sha256 {policy.sha256} != "
            f"{header['policy']['sha256']})"
        )
    rules = [r for r in policy.rules_of(ERASE_SUBJECT, plan.system) if r.subjects]
    if not rules:
        raise ConfigError(
            f"plan {plan.directory}: its policy has no erase_subject rule for {plan.system}: "
            "a receipt covers erasure requests"
        )
    approval = require_approval(plan)
    journal_path, records = _journal_of(plan, Path(journal) if journal is not None else None)
    verified = [r for r in records if r["event"] == "verified"][-1]
    completed_at = _text(verified.get("at"))

    recorded_audit = (header.get("inputs") or {}).get("audit") or {}
    before_dir = Path(before_audit_dir or recorded_audit.get("directory") or "")
    if not str(before_dir) or before_dir == Path():
        raise ConfigError(f"plan {plan.directory} names no audit: give the plan's audit")
    before_manifest = read_manifest(before_dir)
    if recorded_audit.get("findings_sha256") not in (None, before_manifest["findings"]["sha256"]):
        raise ConfigError(f"audit {before_dir} is not the audit plan {plan.directory} came from")
    after_dir = Path(after_audit_dir)
    after_manifest = read_manifest(after_dir)
    _check_after(plan, before_manifest, after_manifest, after_dir, completed_at)
    after_policy = _policy_sha256_of(after_manifest, after_dir)
    if after_policy != policy.sha256:
        raise ConfigError(
            f"after-purge audit {after_dir} ran with another erasure policy (sha256 "
            f"{after_policy}, the plan's is {policy.sha256})"
        )
    before_key = subjects.read_key(before_dir)
    after_key = subjects.read_key(after_dir)
    searched_after = set(after_manifest.get("subjects_searched") or ())
    before_rows = read_findings(before_dir)
    after_rows = read_findings(after_dir)
    actions = list(plan.actions())
    deferred = list(plan.deferred())
    finals: dict[str, dict[str, Any]] = {}
    for record in records:
        if record["event"] in ("done", "skipped") and isinstance(record.get("id"), str):
            finals[record["id"]] = record

    def hidden(target: dict[str, Any]) -> dict[str, Any]:
        shown = hide_target(target, "") if hide_target is not None else target
        return dict(pseudonymize_value(shown))

    stores_before, stores_after = _stores(before_manifest), _stores(after_manifest)
    requests = []
    for rule in rules:
        before_keyed = {subjects.keyed(s, before_key): s for s in rule.subjects}
        after_keyed = {subjects.keyed(s, after_key): s for s in rule.subjects}
        if not set(after_keyed) <= searched_after:
            raise ConfigError(
                f"after-purge audit {after_dir} did not look for the data subjects of rule "
                f"{rule.id!r}: audit again with --erasure-policy {policy.path}"
            )
        from_after = {k: subjects.keyed(s, before_key) for k, s in after_keyed.items()}
        stores = [
            {
                "kind": kind,
                "location": location,
                "fingerprint_before": _text(item.get("fingerprint")),
                "fingerprint_after": _text(stores_after[(kind, location)].get("fingerprint")),
                "depth": rule.search,
            }
            for (kind, location), item in sorted(stores_before.items())
        ]
        found = _holding(before_rows, set(before_keyed), lambda s: s)
        deleted, skipped = [], []
        for action in actions:
            if rule.id not in action.rules:
                continue
            item = {
                "seq": action.seq,
                "action": action.id,
                "kind": action.kind,
                "target": hidden(action.target),
                "precondition": dict(pseudonymize_value(action.precondition)),
                "bytes": action.bytes,
                "findings": list(action.findings),
            }
            final = finals.get(action.id)
            if final is not None and final["event"] == "done":
                outcome = "already gone" if final.get("already_done") else "deleted"
                deleted.append({**item, "outcome": outcome, "at": _text(final.get("at")),
                                "removed": dict(final.get("removed") or {})})  # fmt: skip
            elif final is not None:
                skipped.append({**item, "outcome": "skipped", "at": _text(final.get("at")),
                                "reason": _text(final.get("reason"))})  # fmt: skip
            else:
                skipped.append({**item, "outcome": "not run", "at": "",
                                "reason": "no outcome in the journal"})  # fmt: skip
        later = [
            {"kind": d.kind, "target": hidden(d.target), "reason": d.reason,
             "findings": list(d.findings)}
            for d in deferred if rule.id in d.rules
        ]  # fmt: skip
        unreadable = [_unreadable(r) for r in before_rows if r.get("check") == UNREADABLE]
        remaining = _holding(after_rows, set(after_keyed), from_after.__getitem__)
        after_unreadable = [_unreadable(r) for r in after_rows if r.get("check") == UNREADABLE]
        requests.append({
            "rule": rule.id,
            "legal_basis": rule.legal_basis,
            "search": rule.search,
            "subjects": sorted(before_keyed),
            "stores": stores,
            "found": found,
            "deleted": deleted,
            "deferred": later,
            "skipped": skipped,
            "unreadable": unreadable,
            "after": {
                "clean": not remaining,
                "result": _after_result(remaining, after_unreadable, rule.search),
                "remaining": remaining,
                "unreadable": after_unreadable,
            },
            "counts": {
                "found": len(found), "deleted": len(deleted), "deferred": len(later),
                "skipped": len(skipped), "unreadable": len(unreadable),
                "remaining": len(remaining),
            },
        })  # fmt: skip
    body = {
        "format": FORMAT,
        "tool": {"name": "mqforensics", "version": __version__},
        "made_at": utc_text(now or dt.datetime.now(dt.UTC)),
        "completed_at": completed_at,
        "system": plan.system,
        "plan": {
            "directory": str(plan.directory.resolve()),
            "sha256": plan.sha256,
            "created_at": _text(header.get("created_at")),
            "as_of": _text(header.get("as_of")),
            "policy_sha256": policy.sha256,
            "actions_sha256": _text(header.get("actions_sha256")),
            "action_count": int(header["action_count"]),
        },
        "approval": {
            "approved_by": _text(approval.get("approved_by")),
            "approved_at": _text(approval.get("approved_at")),
            "note": _text(approval.get("note")),
            "plan_sha256": _text(approval.get("plan_sha256")),
        },
        "purge": {
            "journal": str(journal_path.resolve()),
            "journal_sha256": hashlib.sha256(journal_path.read_bytes()).hexdigest(),
            "applied": True,
            "started_at": _text(records[0].get("at")),
            "completed_at": completed_at,
            "verified": bool(verified.get("ok")),
            "problems": [_text(p) for p in verified.get("problems") or ()],
        },
        "audits": {
            "before": _audit_record(before_dir, before_manifest, before_key, policy.sha256),
            "after": _audit_record(after_dir, after_manifest, after_key, after_policy),
        },
        "requests": requests,
    }
    body = dict(pseudonymize_value(body))
    _check_private(body, policy)
    return body


def _audit_record(
    directory: Path, manifest: dict[str, Any], key: bytes, policy_sha256: str
) -> dict[str, Any]:
    return {
        "directory": str(directory.resolve()),
        "created_at": _text(manifest.get("created_at")),
        "as_of": _text(manifest.get("as_of")),
        "source": _text(manifest.get("source")),
        "findings_sha256": _text(manifest["findings"]["sha256"]),
        "findings": int(manifest["findings"].get("count") or 0),
        "policy_sha256": policy_sha256,
        "subject_key_id": _key_id(key),
        "tool_version": _text((manifest.get("tool") or {}).get("version")),
    }


def _check_after(
    plan: Plan,
    before: dict[str, Any],
    after: dict[str, Any],
    after_dir: Path,
    completed_at: str,
) -> None:
    if after.get("system") != plan.system:
        raise ConfigError(
            f"after-purge audit {after_dir} is a {after.get('system')} audit; the plan is a "
            f"{plan.system} plan"
        )
    mine, theirs = set(_stores(before)), set(_stores(after))
    if mine != theirs:
        missing = ", ".join(f"{k} {loc}" for k, loc in sorted(mine - theirs)) or "none"
        extra = ", ".join(f"{k} {loc}" for k, loc in sorted(theirs - mine)) or "none"
        raise ConfigError(
            f"after-purge audit {after_dir} does not name the plan's audit's stores "
            f"(missing: {missing}; others: {extra})"
        )
    done = parse_instant(completed_at).replace(microsecond=0)
    if parse_instant(after["created_at"]) < done:
        raise ConfigError(
            f"after-purge audit {after_dir} was made {after['created_at']}, before the purge "
            f"finished ({completed_at}): audit the stores again"
        )


def _check_private(body: dict[str, Any], policy: Policy) -> None:
    """A receipt never holds a policy's unkeyed subject hash (anyone could test candidate
    addresses against it): a bug if it does."""
    text = canonical_json(body)
    for rule in policy.rules:
        for subject in rule.subjects:
            if subject in text:
                raise ValueError(f"receipt body holds an unkeyed subject hash of rule {rule.id}")


# --- signing and the file -------------------------------------------------------------------------


def signed_bytes(body: dict[str, Any]) -> bytes:
    """What the signature covers: the body as canonical JSON (sorted keys, no whitespace), UTF-8."""
    return canonical_json(body).encode("utf-8")


def sign(body: dict[str, Any], key: Any) -> dict[str, Any]:
    """The receipt document: `body` and its ``signature``."""
    if "signature" in body:
        raise ValueError("a receipt body has no signature field")
    public = key.public_key()
    return {
        **body,
        "signature": {
            "algorithm": ALGORITHM,
            "public_key": public_bytes(public).hex(),
            "key_fingerprint": key_fingerprint(public),
            "value": key.sign(signed_bytes(body)).hex(),
        },
    }


def serialise(document: dict[str, Any]) -> bytes:
    """The one layout of ``RECEIPT.json``: indented, sorted keys, ASCII only, a final newline."""
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True, allow_nan=False)
    return (text + "\n").encode("ascii")


def write_receipt(out: str | Path, document: dict[str, Any], page: str) -> Path:
    """``RECEIPT.json`` and ``RECEIPT.html`` in the directory `out`, made under a temporary
    sibling name and renamed, so a failure leaves nothing half-written; an existing non-empty
    `out` is refused."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} already exists and is not empty: choose another --out")
    with directory_written_whole(out, str(out)) as tmp:
        for name, data in ((RECEIPT_JSON, serialise(document)), (RECEIPT_HTML, page.encode())):
            write_atomically(tmp / name, data)
    return out


# --- verifying ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verification:
    """What `verify` found: `ok`, else `problem` names exactly what fails."""

    path: Path
    ok: bool
    problem: str = ""
    key_fingerprint: str = ""
    pinned: bool = False
    system: str = ""
    plan_sha256: str = ""
    requests: tuple[str, ...] = ()
    clean: bool = False

    def line(self) -> str:
        if not self.ok:
            return f"{self.path}: does not verify: {self.problem}"
        key = "the pinned key" if self.pinned else "its embedded key"
        rules = ", ".join(self.requests)
        after = (
            "after the purge the subjects were found in none of the stores"
            if self.clean
            else "the after-purge audit still finds subjects (listed in the receipt)"
        )
        return (
            f"{self.path}: verified: structure of a {FORMAT} receipt and its Ed25519 signature "
            f"by {key} {self.key_fingerprint}; {self.system} plan {self.plan_sha256[:16]}, "
            f"request(s) {rules}; {after}"
        )

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"<receipt verification: {self.line()}>"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _hex(length: int) -> Callable[[Any], bool]:
    pattern = re.compile(f"[0-9a-f]{{{length}}}")
    return lambda v: isinstance(v, str) and bool(pattern.fullmatch(v))


_STR: Any = str
_OBJ: Any = dict
_INT: Any = _is_int
_BOOL: Any = bool
_HEX64_T = _hex(64)
_WHERE = {"subject": _HEX64_T, "where": _STR}
_PLACE = {"where": _STR, "reason": _STR}
_OBJECT = {"finding": _STR, "queue": _STR, "object": _STR, "bytes": _INT}
_HELD = {**_OBJECT, "depth": _STR, "subjects": [_HEX64_T], "where": [_WHERE]}
_UNREADABLE = {**_OBJECT, "depth": _STR, "unreadable": [_PLACE]}
_ACTION = {"seq": _INT, "action": _STR, "kind": _STR, "target": _OBJ, "precondition": _OBJ,
           "bytes": _INT, "findings": [_STR], "outcome": _STR, "at": _STR}  # fmt: skip
_AUDIT = {"directory": _STR, "created_at": _STR, "as_of": _STR, "source": _STR,
          "findings_sha256": _HEX64_T, "findings": _INT, "policy_sha256": _HEX64_T,
          "subject_key_id": _STR, "tool_version": _STR}  # fmt: skip
_COUNTS = ("found", "deleted", "deferred", "skipped", "unreadable", "remaining")
SCHEMA: dict[str, Any] = {
    "format": _STR,
    "tool": {"name": _STR, "version": _STR},
    "made_at": _STR,
    "completed_at": _STR,
    "system": _STR,
    "plan": {"directory": _STR, "sha256": _HEX64_T, "created_at": _STR, "as_of": _STR,
             "policy_sha256": _HEX64_T, "actions_sha256": _HEX64_T, "action_count": _INT},
    "approval": {"approved_by": _STR, "approved_at": _STR, "note": _STR, "plan_sha256": _HEX64_T},
    "purge": {"journal": _STR, "journal_sha256": _HEX64_T, "applied": _BOOL, "started_at": _STR,
              "completed_at": _STR, "verified": _BOOL, "problems": [_STR]},
    "audits": {"before": _AUDIT, "after": _AUDIT},
    "requests": [{
        "rule": _STR, "legal_basis": _STR, "search": _STR, "subjects": [_HEX64_T],
        "stores": [{"kind": _STR, "location": _STR, "fingerprint_before": _STR,
                    "fingerprint_after": _STR, "depth": _STR}],
        "found": [_HELD],
        "deleted": [{**_ACTION, "removed": _OBJ}],
        "deferred": [{"kind": _STR, "target": _OBJ, "reason": _STR, "findings": [_STR]}],
        "skipped": [{**_ACTION, "reason": _STR}],
        "unreadable": [_UNREADABLE],
        "after": {"clean": _BOOL, "result": _STR, "remaining": [_HELD],
                  "unreadable": [_UNREADABLE]},
        "counts": dict.fromkeys(_COUNTS, _INT),
    }],
    "signature": {"algorithm": _STR, "public_key": _hex(64), "key_fingerprint": _STR,
                  "value": _hex(128)},
}  # fmt: skip
_TYPE_NAMES = {_STR: "text", _OBJ: "an object", _INT: "an integer", _BOOL: "true or false"}


class _Bad(Exception):
    pass


def _walk(value: Any, schema: Any, where: str) -> None:
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise _Bad(f"field {where} is not an object")
        for key, inner in schema.items():
            name = f"{where}.{key}" if where else key
            if key not in value:
                raise _Bad(f"field {name} missing")
            _walk(value[key], inner, name)
        unknown = sorted(set(value) - set(schema))
        if unknown:
            name = f"{where}.{unknown[0]}" if where else unknown[0]
            raise _Bad(f"field {name} is not a field of a receipt")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise _Bad(f"field {where} is not a list")
        for index, item in enumerate(value):
            _walk(item, schema[0], f"{where}[{index}]")
    elif schema in (str, dict, bool):
        if not isinstance(value, schema):
            raise _Bad(f"field {where} is not {_TYPE_NAMES[schema]}")
    elif not schema(value):
        what = _TYPE_NAMES.get(schema, "of the right form")
        raise _Bad(f"field {where} is not {what}")


def _check_meaning(document: dict[str, Any]) -> None:
    if document["format"] != FORMAT:
        raise _Bad(f"field format is {document['format']!r}, not {FORMAT!r}")
    signature = document["signature"]
    if signature["algorithm"] != ALGORITHM:
        raise _Bad(f"field signature.algorithm is {signature['algorithm']!r}, not {ALGORITHM!r}")
    if document["approval"]["plan_sha256"] != document["plan"]["sha256"]:
        raise _Bad("field approval.plan_sha256 is not plan.sha256")
    if not document["requests"]:
        raise _Bad("field requests is empty")
    for index, request in enumerate(document["requests"]):
        for name in _COUNTS:
            listed = request["after"]["remaining"] if name == "remaining" else request[name]
            if request["counts"][name] != len(listed):
                raise _Bad(
                    f"field requests[{index}].counts.{name} is {request['counts'][name]} but "
                    f"{len(listed)} are listed"
                )
        if request["after"]["clean"] != (not request["after"]["remaining"]):
            raise _Bad(f"field requests[{index}].after.clean does not match after.remaining")


def verify(path: str | Path, public_key: str | Path | None = None) -> Verification:
    """Check a ``RECEIPT.json``: JSON, its structure (every field and type), its counts, the
    Ed25519 signature by its embedded key (and that key is the pinned `public_key`, a file,
    when given), and that the file is in the one layout `serialise` writes. A file that does
    not verify is a `Verification` with ``ok`` false and the `problem`; a file that cannot be
    read, or a pinned key that is not a key, is an InputError."""
    path = Path(path)
    pinned = None
    if public_key is not None:
        try:
            pinned = public_key_from(Path(public_key).read_bytes(), f"public key {public_key}")
        except OSError as exc:
            raise InputError(f"public key {public_key} cannot be read ({exc.strerror})") from None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"receipt {path} cannot be read ({exc.strerror or exc})") from None
    return verify_bytes(data, path, pinned)


def verify_bytes(data: bytes, path: Path, pinned: Any = None) -> Verification:
    """`verify` of the bytes `data` of the receipt file `path`; `pinned`: a public key."""

    def bad(problem: str) -> Verification:
        return Verification(path, False, problem)

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return bad(f"not UTF-8 at byte {exc.start}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return bad(f"not JSON at byte {len(text[: exc.pos].encode())} ({exc.msg})")
    except RecursionError:
        return bad("not a receipt (nested too deep)")
    try:
        _walk(document, SCHEMA, "")
        _check_meaning(document)
    except _Bad as exc:
        return bad(str(exc))
    signature = document["signature"]
    body = {k: v for k, v in document.items() if k != "signature"}
    embedded = _crypto().Ed25519PublicKey.from_public_bytes(bytes.fromhex(signature["public_key"]))
    fingerprint = key_fingerprint(embedded)
    if signature["key_fingerprint"] != fingerprint:
        return bad(f"signature.key_fingerprint is not the fingerprint of signature.public_key "
                   f"({fingerprint})")  # fmt: skip
    from cryptography.exceptions import InvalidSignature

    try:
        embedded.verify(bytes.fromhex(signature["value"]), signed_bytes(body))
    except InvalidSignature:
        return bad(f"signature does not verify (key {fingerprint})")
    if pinned is not None and public_bytes(pinned) != public_bytes(embedded):
        return bad(f"signed by key {fingerprint}, not by the pinned key {key_fingerprint(pinned)}")
    layout = serialise(document)
    if layout != data:
        at = next(
            (i for i, (a, b) in enumerate(zip(layout, data, strict=False)) if a != b),
            min(len(layout), len(data)),
        )
        return bad(f"not in the layout it was written in at byte {at} (changed after signing)")
    return Verification(
        path, True, "", fingerprint, pinned is not None, document["system"],
        document["plan"]["sha256"], tuple(r["rule"] for r in document["requests"]),
        all(r["after"]["clean"] for r in document["requests"]),
    )  # fmt: skip
