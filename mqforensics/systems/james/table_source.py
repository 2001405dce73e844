"""What every Spark data source of one exported James table shares: its ``table`` option and
the canonical schema the table's frame has (schema.py; entries without ``table_version``)."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from mqforensics.errors import ConfigError
from mqforensics.systems.james.schema import (
    BROWSE_START,
    BROWSE_START_TABLE,
    CONTENT_START,
    CONTENT_START_TABLE,
    DELETED,
    DELETED_TABLE,
    ENTRIES,
    EVENT_STORE,
    EVENT_STORE_TABLE,
    TABLE_COLUMNS,
)

CANONICAL = {
    "enqueuedmailsv4": ENTRIES.rsplit(", table_version string", 1)[0],
    "enqueuedmailsv3": ENTRIES.rsplit(", table_version string", 1)[0],
    DELETED_TABLE: DELETED,
    BROWSE_START_TABLE: BROWSE_START,
    CONTENT_START_TABLE: CONTENT_START,
    EVENT_STORE_TABLE: EVENT_STORE,
}


class TableSource(DataSource):
    """A data source reading one James table; option ``table`` names it (a key of
    TABLE_COLUMNS) and fixes the schema."""

    def _table(self) -> str:
        table = self.options.get("table", "")
        if table not in TABLE_COLUMNS:
            raise ConfigError(f"option 'table' must be one of {', '.join(TABLE_COLUMNS)}")
        return table

    def schema(self) -> str:
        return CANONICAL[self._table()]
