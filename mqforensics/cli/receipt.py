"""``mqforensics receipt make | verify | keygen``: the signed erasure receipt of an applied plan
(docs/receipts.md). The signing key is never a command-line value: ``--signing-key-file FILE``, or
``MQF_RECEIPT_KEY`` / ``MQF_RECEIPT_KEY_FILE``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mqforensics import api_receipt
from mqforensics.retention.receipt import KEY_FILE_VARIABLE, KEY_VARIABLE


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "receipt", help="the signed erasure receipt of an applied plan: make, verify, keygen"
    )
    steps = parser.add_subparsers(dest="receipt", required=True, metavar="STEP")

    make = steps.add_parser(
        "make",
        help="sign what an applied plan did for each erasure request (RECEIPT.json, .html)",
        description="After `purge PLAN --apply` and a fresh audit of the same stores with the "
        f"same --erasure-policy. The key: --signing-key-file FILE, else {KEY_VARIABLE} (PEM or 64 "
        f"hex digits) or {KEY_FILE_VARIABLE}.",
    )
    make.add_argument("plan", type=Path, metavar="PLAN", help="the applied plan directory")
    make.add_argument(
        "--after", type=Path, required=True, metavar="AUDIT",
        help="an audit of the same stores with the plan's erasure policy, made after the purge",
    )  # fmt: skip
    make.add_argument("--out", type=Path, required=True, metavar="DIR", help="receipt directory")
    make.add_argument(
        "--signing-key-file", type=Path, metavar="FILE",
        help=f"Ed25519 private key file, PEM or raw (default: {KEY_VARIABLE}, "
        f"{KEY_FILE_VARIABLE})",
    )  # fmt: skip
    make.add_argument(
        "--policy", type=Path, metavar="FILE", help="the plan's policy (default: the path the "
        "plan records)",
    )  # fmt: skip
    make.add_argument("--journal", type=Path, metavar="FILE", help="default: PLAN/journal.jsonl")
    make.add_argument(
        "--before", type=Path, metavar="AUDIT", help="the plan's audit (default: as recorded)"
    )
    make.set_defaults(run=run_make)

    verify = steps.add_parser(
        "verify", help="check a receipt's structure and signature (exit 1 if it does not verify)"
    )
    verify.add_argument("receipt", type=Path, metavar="RECEIPT", help="RECEIPT.json (or its dir)")
    verify.add_argument(
        "--public-key", type=Path, metavar="FILE",
        help="the signer's public key (PEM, raw or hex): the receipt must be signed by it",
    )  # fmt: skip
    verify.set_defaults(run=run_verify)

    keygen = steps.add_parser("keygen", help="make an Ed25519 signing key (and FILE.pub)")
    keygen.add_argument("--out", type=Path, required=True, metavar="FILE", help="private key file")
    keygen.set_defaults(run=run_keygen)


def run_make(args: argparse.Namespace) -> int:
    made = api_receipt.receipt(
        args.plan, after=args.after, out=args.out, policy=args.policy,
        signing_key=args.signing_key_file, journal=args.journal, before=args.before,
    )  # fmt: skip
    sys.stdout.write(made.summary())
    print(f"wrote {made.json_path} and {made.html_path}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    result = api_receipt.verify_receipt(args.receipt, public_key=args.public_key)
    print(result.line())
    return 0 if result.ok else 1


def run_keygen(args: argparse.Namespace) -> int:
    fingerprint = api_receipt.receipt_keygen(args.out)
    print(f"wrote private key {args.out} (mode 0600) and public key {args.out}.pub")
    print(f"public key fingerprint {fingerprint}")
    return 0
