"""Table versions: which ``<version>`` directory a table's rows go to, and its schema file.

TiCDC's table version is the commit ts of the DDL that made the table what it is (or the
checkpoint a processor started at); the rows go to ``<schema>/<table>/<version>/`` and the
version's definition to ``<schema>/<table>/meta/schema_<version>_<checksum>.json``. Here the
binlog gives a table's columns with its rows, not with its DDL, so:

* a **DDL** at ``T`` writes a schema file at version ``T`` with the query and TiDB's action
  type, for its table (or for its database: ``<schema>/meta/``), without columns (the new ones
  come with the next row); every table the DDL names (its text mentions the table's name) is
  then past a *barrier* at ``T``;
* a **row** of a table whose definition (columns, types, keys) this run has not placed yet
  reuses the table's newest version if that version is at or after the table's barrier and has
  the same checksum (TiCDC's reuse of a version whose schema file matches); otherwise it starts
  a new version, its commit ts (above every version of the table already there) with a schema
  file without a query. After a restart every table's barrier is the sink's checkpoint (the
  DDLs before it are not known), so a table's first rows of a run reuse a version only if
  that version was made after the checkpoint.

Invariant (what a consumer relies on): every row in a version directory committed after every
row of the table's lower versions and after the DDLs at lower versions that concern it, and
before those at higher ones. A consumer that applies, in version order, each version's DDL and
then its rows (skipping rows whose commit ts it has already seen for that table: replays after
a crash) rebuilds the table.

Example: ``items`` rows at 100..180 go to version 100; ``ALTER TABLE items ADD c`` at 200
writes ``items/meta/schema_200_<crc>.json`` (query, no columns); the next row at 210 has the
new column: version 210 with its own schema file; a restart with checkpoint 250 and a row at
260 with the same columns: 210 is before the barrier 250, so version 260.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tributary.change import Ddl, TableInfo
from tributary.sinks.storage.layout import parse_schema_file_name, schema_file
from tributary.sinks.storage.tabledef import TableDefinition

ListNames = Callable[[str, str], list[str]]  # (schema, table) -> names in its meta directory


@dataclass(frozen=True, slots=True)
class Placed:
    version: int
    schema_file: tuple[str, bytes] | None  # (relative path, bytes) still to write, or None


class TableVersions:
    def __init__(self, list_meta: ListNames, barrier: int) -> None:
        self._list_meta = list_meta
        self._start_barrier = barrier  # the checkpoint at open: below it nothing is known
        self._ddls: list[tuple[int, Ddl]] = []  # the DDLs of this run
        self._newest: dict[tuple[str, str], tuple[int, int]] = {}  # (version, checksum)
        self._placed: dict[TableInfo, int] = {}  # definitions placed since their last DDL

    def _newest_of(self, key: tuple[str, str]) -> tuple[int, int] | None:
        if key not in self._newest:
            found = [p for n in self._list_meta(*key) if (p := parse_schema_file_name(n))]
            if not found:
                return None
            self._newest[key] = max(found)
        return self._newest[key]

    def barrier(self, schema: str, table: str) -> int:
        """The newest DDL of this run that concerns the table, else the checkpoint at open."""
        ts = [t for t, d in self._ddls if concerns(d, schema, table)]
        return max([self._start_barrier, *ts])

    def place(self, info: TableInfo, ts: int) -> Placed:
        """The version for a row of ``info`` committed at ``ts``, and the schema file to write
        before its data file when the version is new."""
        version = self._placed.get(info)
        if version is not None:
            return Placed(version, None)
        key = (info.schema, info.table)
        checksum = TableDefinition.of(info, 0).checksum()
        newest = self._newest_of(key)
        barrier = self.barrier(*key)
        if newest is not None and newest[1] == checksum and newest[0] >= barrier:
            self._placed[info] = newest[0]
            return Placed(newest[0], None)
        version = max(ts, newest[0] + 1 if newest else 0, barrier + 1)
        self._newest[key] = (version, checksum)
        self._placed[info] = version
        path = schema_file(info.schema, info.table, version, checksum)
        return Placed(version, (str(path), TableDefinition.of(info, version).render()))

    def ddl(self, ddl: Ddl, ts: int, action: int) -> tuple[str, bytes]:
        """The schema file of a DDL at ``ts`` (to write once every row before it is written);
        the tables it concerns start a new version with their next rows."""
        definition = TableDefinition(ddl.schema, ddl.table, ts, None, ddl.query, action)
        checksum = definition.checksum()
        if ddl.table:
            self._newest[(ddl.schema, ddl.table)] = (ts, checksum)
        self._ddls.append((ts, ddl))
        for info in [i for i in self._placed if concerns(ddl, i.schema, i.table)]:
            del self._placed[info]
        path = schema_file(ddl.schema, ddl.table, ts, checksum)
        return str(path), definition.render()


def concerns(ddl: Ddl, schema: str, table: str) -> bool:
    """Whether a DDL may change ``schema.table``: it is the DDL's table, or its text names the
    table (``RENAME TABLE a TO b`` concerns ``b``), or it is a DDL of the table's database."""
    if (ddl.schema, ddl.table) == (schema, table):
        return True
    if not ddl.table and ddl.schema == schema:
        return True
    return re.search(rf"(?<![\w$]){re.escape(table)}(?![\w$])", ddl.query, re.I) is not None
