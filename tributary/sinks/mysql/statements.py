"""The MySQL statements of a stretch of row changes (compacted, or plain in upstream order) and
of a DDL (``mysql_ddl``).

Invariant: the statements, run in order, have the effect of the changes run one by one (for
compacted ones, on a downstream that agrees with the upstream before the stretch, see
``sinks.compact``). Multi-row statements are cut at ``max_rows`` rows or about ``max_bytes``
of values, well under MySQL's default 16 MiB ``max_allowed_packet``.

Plain statements merge consecutive single-row INSERTs (REPLACEs in safe mode) of one table with
the same columns into one multi-row statement; anything else runs as its own statement.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from tributary.change import Ddl, Row, RowChange, RowKind, TableInfo
from tributary.sinks.compact import Compacted
from tributary.sql import MYSQL, Statement, delete, delete_many, insert, quote, row_statements

MAX_ROWS = 1000
MAX_BYTES = 1 << 20


_SIZED = (str, bytes)


def row_size(row: Row) -> int:
    """A rough size of a row's values in a statement: 4 bytes a value, plus text and binary by
    length, anything else 8 (written as 12 a value, corrected for the sized ones)."""
    n = 12 * len(row)
    for v in row.values():
        if isinstance(v, _SIZED):
            n += len(v) - 8
    return n


def chunks(rows: Sequence[Row], max_rows: int, max_bytes: int) -> Iterator[Sequence[Row]]:
    """Consecutive runs of ``rows`` with the same columns, at most ``max_rows`` rows and about
    ``max_bytes`` each (a single bigger row is a chunk of its own)."""
    start, size = 0, 0
    keys = rows[0].keys() if rows else None
    for i, r in enumerate(rows):
        n = row_size(r)
        if i > start and (i - start >= max_rows or size + n > max_bytes or r.keys() != keys):
            yield rows[start:i]
            start, size, keys = i, 0, r.keys()
        size += n
    if start < len(rows):
        yield rows[start:]


def compacted_statements(
    c: Compacted, *, safe: bool, max_rows: int = MAX_ROWS, max_bytes: int = MAX_BYTES
) -> list[Statement]:
    """Per table: multi-row DELETEs, then REPLACEs, then INSERTs; then the changes of the
    tables not compacted, in upstream order."""
    out: list[Statement] = []
    for tc in c.tables:
        for part in chunks(tc.deletes, max_rows, max_bytes):
            out.append(delete_many(MYSQL, tc.table, part))
        for rows, replace in ((tc.replaces, True), (tc.inserts, False)):
            for part in chunks(rows, max_rows, max_bytes):
                out.append(insert(MYSQL, tc.table, part, replace=replace))
    out.extend(plain_statements(c.in_order, safe=safe, max_rows=max_rows, max_bytes=max_bytes))
    return out


def plain_statements(
    changes: Iterable[RowChange],
    *,
    safe: bool,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
) -> list[Statement]:
    """The changes in upstream order, consecutive inserts of one table merged."""
    out: list[Statement] = []
    run: list[Row] = []
    run_table: TableInfo | None = None

    def flush() -> None:
        if run_table is not None and run:
            for part in chunks(run, max_rows, max_bytes):
                out.append(insert(MYSQL, run_table, part, replace=safe))
            run.clear()

    for change in changes:
        t = change.table
        if change.kind is RowKind.DELETE or (change.kind is RowKind.UPDATE and not safe):
            flush()
            out.extend(row_statements(MYSQL, change, safe=safe))
            continue
        if change.kind is RowKind.UPDATE:  # safe: DELETE old, then REPLACE new (mergeable)
            flush()
            assert change.old_values is not None
            out.append(delete(MYSQL, t, change.old_values))
        if run and (run_table != t or run[0].keys() != change.values.keys()):
            flush()
        run_table = t
        run.append(change.values)
    flush()
    return out


_CREATE_DATABASE = re.compile(r"^\s*(/\*.*?\*/\s*)*CREATE\s+(DATABASE|SCHEMA)\b", re.I | re.S)


def mysql_ddl(ddl: Ddl) -> list[str]:
    """A DDL as it ran upstream, preceded by ``USE db`` (not for CREATE DATABASE, whose database
    does not exist yet). Executed without parameters, so identifiers keep a single ``%``."""
    if not ddl.schema or _CREATE_DATABASE.match(ddl.query):
        return [ddl.query]
    return [f"USE {quote(MYSQL, ddl.schema, params=False)}", ddl.query]
