"""James blob ids (the object keys of its default bucket), classified and parsed.

Facts, from apache/james-project (snapshot of 2026-08-22, see /work/shared/reference/james.md
§3.2-3.3):

- **passthrough** (``deduplication.enable=false``): ``PassThroughBlobStore`` names every blob
  ``UUID.randomUUID().toString()`` wrapped in ``PlainBlobId``: 36 lower-case characters, version 4,
  IETF variant. Nothing else is generation-aware there, so family and generation are null.
- **generation_aware** (deduplication, the default factory): ``GenerationAwareBlobId.asString()`` is
  ``"<family>_<generation>_<hash>"``. ``Factory.parse`` splits at the first and second ``_`` (so the
  hash may itself contain ``_``: ``GenerationAwareBlobIdTest.wrappedBlobIdCanContainSeparator``,
  ``"12_126_ab_c"``), needs a non-empty part after the second one, and reads both prefixes with
  ``Integer.parseInt`` (int range).
- **minio_generation_aware** (``-Djames.s3.minio.compatibility.mode=true``):
  ``MinIOGenerationAwareBlobId`` is ``"<family>/<generation>/<hash with folders>"`` where
  ``injectFoldersInBlobId`` turns a hash longer than 2 characters into ``h0/h1/rest``; the hash
  reported here is reassembled (``h0 + h1 + rest``).
- **legacy_hash**: an id without the two numeric prefixes is a pre-generation id, parsed by James
  with ``NO_FAMILY = 0`` and ``NO_GENERATION = 0``. It is a legacy *hash* when it has the shape of
  a SHA-256 in one of the encodings ``DeDuplicationBlobStore`` can use (property
  ``james.blob.id.hash.encoding``: Guava ``base64Url`` (default), ``base64``, ``base16``/``hex``
  (upper case), ``base32``, ``base32Hex``, all padded) or of ``HashCode.toString()`` (lower-case
  hex), which ``HashBlobId`` used before JAMES-2287 (commit 64b79e14f8, 2021-08-09).
- **unknown**: anything else, including ``recovery/...`` sidecar keys (``BlobStoreDAO.
  RECOVERY_BLOB_PREFIX``, kept plain by James) and ids James's parser rejects (signs, negative or
  out-of-int-range prefixes: ``GenerationAwareBlobIdTest.Failures``).

Only ASCII digits count as numeric (``Integer.parseInt`` also takes a leading ``+`` and other
Unicode digits, but ``asString()`` never writes them, so such a key is no id James produced).
`parse_blob_id` (Python) and `with_parsed_blob_ids` (Spark column expressions, for millions of
rows) share the same regular expressions and agree on every key.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PASSTHROUGH = "passthrough"
GENERATION_AWARE = "generation_aware"
MINIO_GENERATION_AWARE = "minio_generation_aware"
LEGACY_HASH = "legacy_hash"
UNKNOWN = "unknown"
ID_KINDS = (PASSTHROUGH, GENERATION_AWARE, MINIO_GENERATION_AWARE, LEGACY_HASH, UNKNOWN)

INT_MAX = 2**31 - 1  # Integer.parseInt range; James reads family and generation with it
RECOVERY_PREFIX = "recovery/"  # BlobStoreDAO.RECOVERY_BLOB_PREFIX

# A number that fits Integer.parseInt's range is at most 10 significant digits: the group keeps
# them (leading zeros dropped), so a cast to bigint is always safe and then compared to INT_MAX.
_NUMBER = r"0*([0-9]{1,10})"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_GENERATION_AWARE = _NUMBER + "_" + _NUMBER + "_(.+)"
# h0 and h1 are single characters (possibly "/" themselves with standard base64).
_MINIO = _NUMBER + "/" + _NUMBER + "/(.)/(.)/(.+)"
# SHA-256 = 32 bytes: base64 = 42 chars + a last char carrying 4 bits (index multiple of 4) + "=";
# base32 = 51 chars + a last char carrying 1 bit (index 0 or 16) + "====".
_HASH = "|".join(
    (
        r"[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]=",  # base64Url (Guava, padded): the default
        r"[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=",  # base64
        r"[0-9A-F]{64}",  # base16 / hex (Guava base16 is upper case)
        r"[0-9a-f]{64}",  # HashCode.toString() before 2021-08
        r"[A-Z2-7]{51}[AQ]====",  # base32
        r"[0-9A-V]{51}[0G]====",  # base32Hex
    )
)
_LEGACY_HASH = "(?:" + _HASH + ")"

_PY = {
    name: re.compile(body, re.DOTALL)
    for name, body in (
        ("uuid", _UUID),
        ("generation", _GENERATION_AWARE),
        ("minio", _MINIO),
        ("hash", _LEGACY_HASH),
    )
}


def _java(body: str) -> str:
    """The same pattern anchored for Java's regex engine (``\\z``: the very end of the input)."""
    return "(?s)^(?:" + body + r")\z"


def _fits(*numbers: str) -> bool:
    return all(int(n) <= INT_MAX for n in numbers)


def parse_blob_id(key: str) -> tuple[str, int | None, int | None, str | None]:
    """``(id_kind, family, generation, hash)`` of an object key of James's default bucket.

    family/generation are null for passthrough and unknown ids, 0/0 for legacy hashes (James's
    ``NO_FAMILY``/``NO_GENERATION``); hash is null for passthrough and unknown ids.
    """
    if key.startswith(RECOVERY_PREFIX):
        return (UNKNOWN, None, None, None)
    if _PY["uuid"].fullmatch(key):
        return (PASSTHROUGH, None, None, None)
    match = _PY["generation"].fullmatch(key)
    if match and _fits(match[1], match[2]):
        return (GENERATION_AWARE, int(match[1]), int(match[2]), match[3])
    match = _PY["minio"].fullmatch(key)
    if match and _fits(match[1], match[2]):
        return (
            MINIO_GENERATION_AWARE,
            int(match[1]),
            int(match[2]),
            match[3] + match[4] + match[5],
        )
    if _PY["hash"].fullmatch(key):
        return (LEGACY_HASH, 0, 0, key)
    return (UNKNOWN, None, None, None)


def _kind_column(key: Column) -> Column:
    from pyspark.sql import functions as F

    def fits(body: str) -> Column:
        java = _java(body)
        return (F.regexp_extract(key, java, 1).cast("bigint") <= INT_MAX) & (
            F.regexp_extract(key, java, 2).cast("bigint") <= INT_MAX
        )

    return (
        F.when(key.startswith(RECOVERY_PREFIX), F.lit(UNKNOWN))
        .when(key.rlike(_java(_UUID)), F.lit(PASSTHROUGH))
        .when(
            key.rlike(_java(_GENERATION_AWARE)) & fits(_GENERATION_AWARE), F.lit(GENERATION_AWARE)
        )
        .when(key.rlike(_java(_MINIO)) & fits(_MINIO), F.lit(MINIO_GENERATION_AWARE))
        .when(key.rlike(_java(_LEGACY_HASH)), F.lit(LEGACY_HASH))
        .otherwise(F.lit(UNKNOWN))
    )


def with_parsed_blob_ids(frame: DataFrame, key_column: str = "key") -> DataFrame:
    """`frame` plus ``id_kind, family, generation, hash`` parsed from its key column.

    Pure column expressions (Java regexes, no Python UDF), so it runs in the JVM at any scale;
    agrees with `parse_blob_id` on every key.
    """
    from pyspark.sql import functions as F

    key = F.col(key_column)
    kind = F.col("id_kind")

    def group(body: str, index: int) -> Column:
        return F.regexp_extract(key, _java(body), index)

    def number(index: int) -> Column:
        return (
            F.when(kind == GENERATION_AWARE, group(_GENERATION_AWARE, index).cast("bigint"))
            .when(kind == MINIO_GENERATION_AWARE, group(_MINIO, index).cast("bigint"))
            .when(kind == LEGACY_HASH, F.lit(0).cast("bigint"))
        )

    hash_ = (
        F.when(kind == GENERATION_AWARE, group(_GENERATION_AWARE, 3))
        .when(
            kind == MINIO_GENERATION_AWARE,
            F.concat(group(_MINIO, 3), group(_MINIO, 4), group(_MINIO, 5)),
        )
        .when(kind == LEGACY_HASH, key)
    )
    return frame.withColumn("id_kind", _kind_column(key)).withColumns(
        {"family": number(1).cast("int"), "generation": number(2), "hash": hash_.cast("string")}
    )
