"""The canonical frames of a slimta audit: one frame, every store's items in it.

- ``items``: one row per stored item (`items.ITEMS`), whatever the backend: ``backend``
  (``disk``, ``redis``, ``s3``), ``store`` (env_dir, ``HOST:PORT/DB`` or
  ``s3://BUCKET/PREFIX``), ``kind`` (``message``, ``tmp_file``, ``queue_entry``,
  ``other_key``), ``id``; ``parts`` (each stored file, key or object: ``name``, ``size``,
  ``digest``, ``modified``), ``stored_bytes``, ``modified`` (the newest part's),
  ``load_position`` (an ``.env``'s place in slimta's load order); ``envelope_state`` /
  ``meta_state`` (``ok``, ``missing`` or a `safe_pickle` error kind) with ``envelope_error`` /
  ``meta_error``; what the envelope holds: ``sender``, ``recipients``, ``arrival`` (its own
  timestamp), ``message_bytes``, ``client_ip``, ``client_host``, ``client_name``,
  ``client_protocol``, ``receiver``, ``is_bounce``, ``message_id``; what the meta holds:
  ``attempts``, ``next_attempt`` (the meta timestamp: not an arrival time),
  ``delivered_indexes`` and ``delivered_indexes_type``; a queue entry's ``entry_hex``; an S3
  object's user ``metadata`` (JSON). See `items` for each column's meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class SlimtaFrames:
    """The frames every check reads."""

    items: DataFrame
