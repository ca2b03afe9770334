"""The schema tracker: table id -> the table as its latest TABLE_MAP described it.

Rows are decoded with the TABLE_MAP that precedes them in the same transaction, so they are
read with the schema of their time: after ``ALTER TABLE t ADD COLUMN c`` the next TABLE_MAP of
``t`` has one more column, while rows written before the ALTER (read later by a lagging
reader) come with the TABLE_MAP of before. Nothing is read from today's information_schema,
and a reader resuming at any transaction boundary needs no stored schema: the first rows of
every transaction are preceded by TABLE_MAPs of every table they touch.

Compiling a table (names, types, decoders) costs far more than its rows when a transaction is
small, so a compiled table is cached by the TABLE_MAP's bytes (table id included): the same
table mapped again with the same definition reuses it. ``version`` counts the DDLs seen since
the tracker started, and ``table_version`` the definitions seen per table, bumped when a DDL
names the table or its TABLE_MAP changes; both count from the tracker's start, not from the
upstream's history. ``mariadb`` says which server writes the TABLE_MAPs (their SIGNEDNESS
bits count different columns, see ``tablemap``); the reader sets it from each binlog file's
FORMAT_DESCRIPTION.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from tributary.change import TableInfo
from tributary.sources.mysql import columns
from tributary.sources.mysql.charsets import Charsets
from tributary.sources.mysql.errors import ConfigurationError
from tributary.sources.mysql.numeric import Decoder
from tributary.sources.mysql.tablemap import TableMap, parse_table_map

log = logging.getLogger(__name__)

_CACHE_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class CompiledTable:
    info: TableInfo
    names: tuple[str, ...]
    decoders: tuple[Decoder, ...]
    version: int


def compile_table(tmap: TableMap, charsets: Charsets, tz: dt.tzinfo, version: int) -> CompiledTable:
    if not tmap.has_names:
        raise ConfigurationError(
            f"TABLE_MAP of {tmap.schema}.{tmap.table} has no column names: the upstream must "
            "run with binlog_row_metadata=FULL (MariaDB >= 10.5, MySQL >= 8.0.1)"
        )
    cols = []
    decoders = []
    for c in tmap.columns:
        cs = columns.charset_of(c, charsets)
        cols.append((c.name, columns.mysql_type(c, cs)))
        decoders.append(columns.decoder(c, cs, tz))
    pk = [tmap.columns[i].name for i in tmap.primary_key]
    not_null = [c.name for c in tmap.columns if not c.nullable]
    info = TableInfo.build(tmap.schema, tmap.table, cols, primary_key=pk, not_null=not_null)
    return CompiledTable(info, info.column_names, tuple(decoders), version)


class SchemaTracker:
    def __init__(self, charsets: Charsets | None = None, tz: dt.tzinfo = dt.UTC) -> None:
        self._charsets = charsets or Charsets()
        self._tz = tz
        self._by_id: dict[int, CompiledTable] = {}
        self._by_bytes: dict[bytes, CompiledTable] = {}
        self._table_versions: dict[tuple[str, str], int] = {}
        self._defs: dict[tuple[str, str], tuple[object, ...]] = {}
        self.version = 0
        self.mariadb = False

    def on_table_map(self, event: bytes, post_header_len: int) -> CompiledTable:
        """Map the event's table id to its compiled table (compiling on first sight)."""
        key = event[19:]
        hit = self._by_bytes.get(key)
        if hit is None:
            tmap = parse_table_map(event, post_header_len, mariadb=self.mariadb)
            name = (tmap.schema, tmap.table)
            shape = (tmap.columns, tmap.primary_key)
            version = self._table_versions.get(name, 0)
            if self._defs.get(name, shape) != shape:
                version += 1
            self._defs[name] = shape
            self._table_versions[name] = version
            hit = compile_table(tmap, self._charsets, self._tz, version)
            if len(self._by_bytes) >= _CACHE_LIMIT:
                self._by_bytes.clear()
            self._by_bytes[key] = hit
            self._by_id[int.from_bytes(event[19:25], "little")] = hit
        else:
            self._by_id[int.from_bytes(event[19:25], "little")] = hit
        return hit

    def table(self, table_id: int) -> CompiledTable | None:
        return self._by_id.get(table_id)

    def table_version(self, schema: str, table: str) -> int:
        return self._table_versions.get((schema, table), 0)

    def on_ddl(self, schema: str, table: str) -> None:
        """A DDL ran: bump the versions, forget table ids (the server may reuse them)."""
        self.version += 1
        if table:
            name = (schema, table)
            self._table_versions[name] = self._table_versions.get(name, 0) + 1
            self._defs.pop(name, None)
        self._by_id.clear()
        self._by_bytes.clear()
