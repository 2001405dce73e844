"""The digests a slimta plan's preconditions record, computed the same way by readers and purger.

A file is named by its size and SHA-256; a Redis hash by one SHA-256 over all its fields, so that
any field slimta rewrites (``timestamp``, ``attempts``, ``delivered_indexes``) changes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from mqforensics.file_digest import file_digest

__all__ = ["file_digest", "hash_fields_digest"]


def hash_fields_digest(fields: Mapping[bytes, bytes]) -> str:
    """SHA-256 of a hash's full content (HGETALL), independent of the order Redis returns it in.

    Fields are taken sorted by name, each as ``len(name) ":" name len(value) ":" value``: the
    lengths make the encoding unambiguous whatever bytes names and values hold.
    """
    digest = hashlib.sha256()
    for name in sorted(fields):
        value = fields[name]
        digest.update(b"%d:" % len(name) + name + b"%d:" % len(value) + value)
    return digest.hexdigest()
