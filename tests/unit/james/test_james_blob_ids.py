"""James blob ids: exact parses of every kind, and the Spark column version agreeing with Python."""

import base64
import hashlib

import pytest

from mqforensics.systems.james.blob_ids import parse_blob_id, with_parsed_blob_ids

DIGEST = hashlib.sha256(b"Subject: hello\r\n\r\nbody\r\n").digest()
B64URL = base64.urlsafe_b64encode(DIGEST).decode()
B64 = base64.b64encode(DIGEST).decode()
HEX = DIGEST.hex()
B32 = base64.b32encode(DIGEST).decode()
B32HEX = base64.b32hexencode(DIGEST).decode()
# DeduplicationBlobStoreContract's example id (base64Url of a SHA-256).
JAMES_EXAMPLE = "MfemXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY="
UUID = "210e7136-ede3-44eb-9495-3ed816d6e23b"  # James json/mail1.json

CASES = {
    # passthrough: UUID.randomUUID().toString()
    UUID: ("passthrough", None, None, None),
    "2b0f4c1e-9a7d-4e3b-8c55-0d2e6f7a9b10": ("passthrough", None, None, None),
    # generation-aware
    f"1_628_{JAMES_EXAMPLE}": ("generation_aware", 1, 628, JAMES_EXAMPLE),
    "12_126_ab_c": ("generation_aware", 12, 126, "ab_c"),
    "0_0_abc": ("generation_aware", 0, 0, "abc"),
    "2147483647_2147483647_x": ("generation_aware", 2147483647, 2147483647, "x"),
    "007_0009_x": ("generation_aware", 7, 9, "x"),  # Integer.parseInt takes leading zeros
    f"3_700_{B64}": ("generation_aware", 3, 700, B64),  # standard base64 may hold "/"
    # MinIO-compatible: family/generation/h0/h1/rest
    f"1/628/{JAMES_EXAMPLE[0]}/{JAMES_EXAMPLE[1]}/{JAMES_EXAMPLE[2:]}": (
        "minio_generation_aware",
        1,
        628,
        JAMES_EXAMPLE,
    ),
    "2/5///a/bcd=": ("minio_generation_aware", 2, 5, "/abcd="),  # h0 is "/" (base64)
    "2/5/////xy=": ("minio_generation_aware", 2, 5, "//xy="),  # h0 and h1 are "/"
    # legacy ids (family 0, generation 0) shaped like a SHA-256
    JAMES_EXAMPLE: ("legacy_hash", 0, 0, JAMES_EXAMPLE),
    B64URL: ("legacy_hash", 0, 0, B64URL),
    B64: ("legacy_hash", 0, 0, B64),
    HEX: ("legacy_hash", 0, 0, HEX),
    HEX.upper(): ("legacy_hash", 0, 0, HEX.upper()),
    B32: ("legacy_hash", 0, 0, B32),
    B32HEX: ("legacy_hash", 0, 0, B32HEX),
    # James's fallbacks to a plain id that are no hash, and ids its parser rejects
    "abc": ("unknown", None, None, None),
    "abc_": ("unknown", None, None, None),
    "1_abc": ("unknown", None, None, None),
    "1_2": ("unknown", None, None, None),
    "1_2_": ("unknown", None, None, None),
    "_abc": ("unknown", None, None, None),
    "invalid_2_abc": ("unknown", None, None, None),
    "-1_2_abc": ("unknown", None, None, None),
    "+1_2_abc": ("unknown", None, None, None),
    "2147483648_1_abc": ("unknown", None, None, None),  # beyond Integer.parseInt
    "1_99999999999_abc": ("unknown", None, None, None),
    f"recovery/1_2_{JAMES_EXAMPLE}": ("unknown", None, None, None),
    UUID.upper(): ("unknown", None, None, None),
    "210e7136-ede3-14eb-9495-3ed816d6e23b": ("unknown", None, None, None),  # version 1
    JAMES_EXAMPLE[:-2] + "Z=": ("unknown", None, None, None),  # not a 32-byte encoding
    HEX[:-1]: ("unknown", None, None, None),
    "1/628/a": ("unknown", None, None, None),
    "1_2_x\n": ("generation_aware", 1, 2, "x\n"),
    HEX + "\n": ("unknown", None, None, None),
    "0a/1f/blob-1": ("unknown", None, None, None),
}


@pytest.mark.parametrize(("key", "expected"), CASES.items(), ids=repr)
def test_parse_blob_id(key, expected):
    assert parse_blob_id(key) == expected


def test_the_encodings_are_the_lengths_james_produces():
    assert (len(B64URL), len(HEX), len(B32)) == (44, 64, 56)
    assert parse_blob_id(base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).decode())[0] == (
        "legacy_hash"
    )


def test_spark_columns_agree_with_python(spark):
    keys = list(CASES)
    # Many random hashes in every encoding, to exercise each last-character class.
    for n in range(200):
        digest = hashlib.sha256(str(n).encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).decode()
        keys += [encoded, f"1_{n}_{encoded}", f"1/{n}/{encoded[0]}/{encoded[1]}/{encoded[2:]}"]
        keys += [base64.b64encode(digest).decode(), base64.b32encode(digest).decode()]
    frame = spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "key string, n int")
    parsed = with_parsed_blob_ids(frame)
    assert parsed.columns == ["key", "n", "id_kind", "family", "generation", "hash"]
    assert dict(parsed.dtypes)["family"] == "int"
    assert dict(parsed.dtypes)["generation"] == "bigint"
    rows = {r.n: (r.id_kind, r.family, r.generation, r.hash) for r in parsed.collect()}
    assert len(rows) == len(keys)
    mismatches = [(k, rows[i], parse_blob_id(k)) for i, k in enumerate(keys)]
    assert [m for m in mismatches if m[1] != m[2]] == []
    assert {kind for kind, *_ in rows.values()} == {
        "passthrough",
        "generation_aware",
        "minio_generation_aware",
        "legacy_hash",
        "unknown",
    }
