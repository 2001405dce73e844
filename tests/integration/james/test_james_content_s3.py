"""The content search of James's queued mails reading the blobs from the real SeaweedFS S3: a
zstd-compressed header blob carrying James's ``content-encoding: zstd`` object metadata is
searched decompressed, a live mail's missing blob is unreadable, and the S3 keys appear in
nothing the audit writes or prints."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqforensics.addresses import address_forms
from mqforensics.cli import main
from mqforensics.retention.policy import subject_hash
from mqforensics.services.seaweedfs import s3_endpoint
from mqforensics.subjects import keyed, read_key
from tests.integration.james.test_james_blobs_s3 import drop_bucket

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "james" / "sample"
DORA = "dora@example.net"


def _live_rows_with_blobs() -> list[dict]:
    rows = pq.read_table(SAMPLE / "enqueuedmailsv4.parquet").to_pylist()
    deleted = pq.read_table(SAMPLE / "deletedmailsv2.parquet").to_pylist()
    consumed = {(r["queuename"], r["enqueueid"]) for r in deleted}
    blobs = SAMPLE / "blobs"
    return sorted(
        (r for r in rows if (r["queuename"], r["enqueueid"]) not in consumed
         and (blobs / r["headerblobid"]).exists() and (blobs / r["bodyblobid"]).exists()),
        key=lambda r: r["enqueueid"],
    )  # fmt: skip


@pytest.fixture(scope="module")
def bucket(s3):
    """The sample's blobs in a fresh bucket; the first live row's header blob replaced by a
    zstd-compressed one naming the subject (with James's metadata), the second's deleted."""
    client = s3_endpoint(s3).client()
    name = f"james-content-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    rows = _live_rows_with_blobs()
    planted, gone = rows[0], rows[1]
    try:
        for path in sorted((SAMPLE / "blobs").iterdir()):
            if path.name == gone["headerblobid"]:
                continue
            client.put_object(Bucket=name, Key=path.name, Body=path.read_bytes())
        header = (
            b"Date: Tue, 03 Nov 2026 08:30:22 +0000\r\nFrom: Dora <dora@example.net>\r\n"
            b"To: list@lists.example\r\nSubject: planted\r\n\r\n"
        )
        client.put_object(
            Bucket=name, Key=planted["headerblobid"],
            Body=pa.Codec("zstd").compress(header, asbytes=True),
            Metadata={"content-encoding": "zstd", "content-original-size": str(len(header))},
        )  # fmt: skip
        yield name, planted["enqueueid"], gone["enqueueid"]
    finally:
        drop_bucket(client, name)


def test_blobs_read_from_s3_are_searched_decompressed(
    spark, s3, bucket, tmp_path, monkeypatch, capsys
):
    name, planted, gone = bucket
    monkeypatch.setenv("MQF_S3_ENDPOINT", s3["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3["region"])
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'version = 1\n[[rules]]\nid = "erase-1"\nkind = "erase_subject"\n'
        f'legal_basis = "GDPR Art. 17"\naddresses = ["{DORA}"]\nsearch = "full"\n'
    )
    snapshot = tmp_path / "snapshot"
    shutil.copytree(SAMPLE, snapshot, ignore=shutil.ignore_patterns("blobs"))
    out = tmp_path / "audit"
    assert main(["audit", "james", "--snapshot", str(snapshot), "--blobs", f"s3://{name}",
                 "--erasure-policy", str(policy), "--out", str(out)]) == 1  # fmt: skip
    findings = json.loads((out / "findings.raw.json").read_text())
    key = read_key(out)
    dora = {keyed(subject_hash(form), key) for form in address_forms(DORA)}
    personal = {
        f["detail"]["enqueueid"]: f["detail"]["found"]
        for f in findings
        if f["check"] == "personal_data"
    }
    assert personal == {planted: [{"subject": next(iter(dora)), "where": "header:from"}]}
    unreadable = {
        f["detail"]["enqueueid"]: f["detail"]["unreadable"]
        for f in findings
        if f["check"] == "unreadable_content"
    }
    assert unreadable[gone] == [
        {"where": "headers", "reason": "blob missing"},
        {"where": "body", "reason": "header blob unreadable: MIME structure unknown"},
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert "unreadable_content" not in manifest["not_run"] and manifest["partial"] == {}
    printed = capsys.readouterr()
    for path in (p for p in out.rglob("*") if p.is_file()):
        text = path.read_bytes()
        assert s3["secret_key"].encode() not in text and s3["access_key"].encode() not in text
    assert s3["secret_key"] not in printed.out + printed.err
