"""Applying compacted changes to a SQLite downstream (the embedded default), in one transaction.

SQLite has one writer, so Spark computes and the driver writes: each table's tombstones and
upserts are streamed to the driver (``toLocalIterator``, a partition at a time) and applied as
``DELETE ... WHERE key`` and ``INSERT OR REPLACE`` in a single ``BEGIN IMMEDIATE`` ...
``COMMIT`` over every table; a table's progress is its rows written of its compacted rows
(counted first). Tables are named as ``sinks.sqlite`` names them
(``"schema__table"``). Invariant: all or nothing, and a rerun writes the same final rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from itertools import islice

from pyspark.sql import DataFrame

from services.spark.errors import JobError
from services.spark.progress import Progress
from services.spark.target import Applied, TableChanges
from tributary.sql import SQLITE, quote, table_name
from tributary.staging.format import StagedTable, arrow_kind

CHUNK = 5000
_INT64 = 1 << 63


def _bindable(v: object) -> object:
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def _unsigned(v: object) -> object:
    """BIGINT UNSIGNED is staged as text; ``sinks.sqlite`` binds it as an integer when it fits
    int64 and as its decimal text otherwise, and so does this."""
    if isinstance(v, str):
        n = int(v)
        return n if n < _INT64 else v
    return v


def _converters(table: StagedTable, names: Sequence[str]) -> list[Callable[[object], object]]:
    kinds = {c.name: c for c in table.columns}
    return [
        _unsigned
        if kinds[n].kind == "str"
        and arrow_kind(kinds[n].mysql_type) == "str"
        and kinds[n].mysql_type.lower().startswith("bigint")
        else _bindable
        for n in names
    ]


def _rows(df: DataFrame, table: StagedTable) -> Iterator[tuple[object, ...]]:
    convert = _converters(table, df.columns)
    for row in df.toLocalIterator():
        yield tuple(f(v) for f, v in zip(convert, row, strict=True))


def _chunks(rows: Iterator[tuple[object, ...]]) -> Iterator[list[tuple[object, ...]]]:
    while chunk := list(islice(rows, CHUNK)):
        yield chunk


def _size(tc: TableChanges) -> int:
    """The rows the table's writes take (tombstones and upserts; its DataFrames are cached,
    so counting is a pass over memory), at least 1: the progress fraction's denominator."""
    if tc.changes is not None:
        n = tc.changes.count()
    else:
        n = tc.upserts.count() + (tc.deletes.count() if tc.deletes is not None else 0)
    return max(1, n)


class SqliteTarget:
    def __init__(self, path: str) -> None:
        if not path:
            raise JobError("sqlite target URL has no path")
        self._path = path

    def apply(
        self, start_ts: int, end_ts: int, tables: Sequence[TableChanges], progress: Progress
    ) -> Applied:
        upserts = deletes = 0
        try:
            conn = sqlite3.connect(self._path, isolation_level=None)
        except sqlite3.Error as e:
            raise JobError(f"cannot open {self._path}: {e}", retriable=True) from e
        try:
            conn.execute("BEGIN IMMEDIATE")
            for tc in tables:
                t = tc.table
                size, written = _size(tc), 0
                name = table_name(SQLITE, t.schema, t.table, params=False)
                if tc.deletes is not None:
                    where = " AND ".join(f"{quote(SQLITE, k)} = ?" for k in t.primary_key)
                    sql = f"DELETE FROM {name} WHERE {where}"
                    for chunk in _chunks(_rows(tc.deletes.select(*t.primary_key), t)):
                        conn.executemany(sql, chunk)
                        deletes += len(chunk)
                        written += len(chunk)
                        progress.table(t, written / size)
                cols = ",".join(quote(SQLITE, c) for c in t.column_names)
                marks = ",".join("?" * len(t.column_names))
                sql = f"INSERT OR REPLACE INTO {name} ({cols}) VALUES ({marks})"
                for chunk in _chunks(_rows(tc.upserts.select(*t.column_names), t)):
                    conn.executemany(sql, chunk)
                    upserts += len(chunk)
                    written += len(chunk)
                    progress.table(t, written / size)
                progress("applied", table=t.qualified)
                progress.table(t, 1.0)
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise JobError(f"sqlite {self._path}: {e}") from e
        finally:
            conn.close()
        return Applied(upserts, deletes)
