"""The MySQL sink's DDL record (TiCDC's ``ddl_ts`` bookkeeping) and the unnamed index additions
a replayed DDL may repeat.

One row per key (a drainer's cluster ID, a changefeed's stable checkpoint key) in
``<checkpoint-schema>.<checkpoint-table>_ddl_ts``: the commit ts of the last DDL the sink ran
downstream, its table and query, and ``finished``. Before a DDL runs the row says
``finished = 0`` at its commit ts (autocommit), after it ``finished = 1`` in one transaction
with the checkpoint row. So, for the sink that reads it before each DDL:

* ``finished`` at or above the DDL's commit ts: the DDL ran, skip it (a capture that took a
  spread changefeed over, whose checkpoint row is its run's own, replays the DDL);
* not ``finished`` at exactly the DDL's commit ts: the DDL may or may not have run (a DDL
  commits implicitly, the record cannot go with it): a replay. Error codes tell most DDLs
  apart (``conn.IGNORABLE_DDL_CODES``); an ``ADD INDEX (c)`` without a name does not fail a
  second time (MySQL names it ``c_2``), so ``unnamed_indexes`` gives what it adds and the sink
  skips it when an identical index (same columns, prefixes, uniqueness) is there already.

Invariant: a DDL whose record is finished is never run again for that key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tributary.change import Ddl
from tributary.sinks.lexer import Cursor, Token
from tributary.sql import MYSQL, Statement, table_name

SUFFIX = "_ddl_ts"


@dataclass(frozen=True, slots=True)
class DdlMark:
    commit_ts: int
    finished: bool


def mark_table(checkpoint_table: str) -> str:
    return checkpoint_table + SUFFIX


def mark_setup(schema: str, table: str) -> list[str]:
    """Create the record's table if missing (in the checkpoint's schema, made before it)."""
    return [
        f"CREATE TABLE IF NOT EXISTS {table_name(MYSQL, schema, table, params=False)}("
        "ddl_key bigint unsigned primary key, ddl_ts bigint unsigned not null, "
        "finished bool not null, table_name varchar(512) not null, query mediumtext, "
        "updated_at timestamp not null default current_timestamp on update current_timestamp)",
    ]


def mark_load(key: int, schema: str, table: str) -> Statement:
    return Statement(
        f"SELECT ddl_ts, finished FROM {table_name(MYSQL, schema, table)} WHERE ddl_key = %s",
        (key,),
    )


def mark_from_rows(rows: Sequence[Any]) -> DdlMark | None:
    return DdlMark(int(rows[0][0]), bool(rows[0][1])) if rows else None


def mark_save(
    key: int, commit_ts: int, ddl: Ddl, *, finished: bool, schema: str, table: str
) -> Statement:
    where = f"{ddl.schema}.{ddl.table}" if ddl.table else ddl.schema
    return Statement(
        f"REPLACE INTO {table_name(MYSQL, schema, table)}"
        "(ddl_key, ddl_ts, finished, table_name, query) VALUES (%s, %s, %s, %s, %s)",
        (key, commit_ts, finished, where, ddl.query),
    )


def mark_forget_finished(key: int, schema: str, table: str) -> Statement:
    """Drop a finished record (its checkpoint row was removed: a fresh start)."""
    return Statement(
        f"DELETE FROM {table_name(MYSQL, schema, table)} WHERE ddl_key = %s AND finished",
        (key,),
    )


@dataclass(frozen=True, slots=True)
class IndexShape:
    """What makes two indexes the same: columns (lower case) with prefix lengths, uniqueness."""

    parts: tuple[tuple[str, int | None], ...]
    unique: bool


@dataclass(frozen=True, slots=True)
class UnnamedIndexes:
    """The unnamed indexes an ``ALTER TABLE`` made of nothing else adds to ``schema.table``."""

    schema: str
    table: str
    shapes: tuple[IndexShape, ...]


def unnamed_indexes(ddl: Ddl) -> UnnamedIndexes | None:
    """The indexes ``ALTER TABLE [s.]t ADD INDEX (c), ADD UNIQUE KEY (a, b(10)), ...`` adds
    without names; None for any other statement (a named index, another change among the
    specs, an expression key part: those fail by error code or are left alone).

    ``ALTER TABLE t ADD INDEX (a), ADD UNIQUE (b(8) DESC)`` gives table ``t`` of the DDL's
    schema and the shapes ``(((a, None),), unique False)``, ``(((b, 8),), unique True)``."""
    try:
        c = Cursor(ddl.query)
        c.expect("ALTER")
        c.accept("ONLINE")
        c.accept("IGNORE")
        c.expect("TABLE")
        schema, table = c.qualified(ddl.schema)
        shapes = [_add_index(c)]
        while c.accept(","):
            shapes.append(_add_index(c))
        if not c.at_end():
            return None
    except ValueError:
        return None
    if any(s is None for s in shapes):
        return None
    return UnnamedIndexes(schema, table, tuple(s for s in shapes if s is not None))


def _add_index(c: Cursor) -> IndexShape | None:
    if not c.accept("ADD"):
        return None
    unique = c.accept("UNIQUE")
    if unique:
        _ = c.accept("INDEX") or c.accept("KEY")
    elif not (c.accept("INDEX") or c.accept("KEY")):
        return None
    if c.accept("USING"):
        c.name()
    if not c.at("("):
        return None  # named (or IF NOT EXISTS name): a replay fails with 1061
    parts = _key_parts(c.skip_group())
    while not (c.at_end() or c.at(",")):  # index options: USING BTREE, COMMENT '...', ...
        c.next()
    return IndexShape(parts, unique) if parts else None


def _key_parts(tokens: list[Token]) -> tuple[tuple[str, int | None], ...]:
    """``a, b(10) DESC`` -> ``((a, None), (b, 10))``; empty for an expression part."""
    out: list[tuple[str, int | None]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind not in ("word", "qident"):
            return ()
        prefix: int | None = None
        i += 1
        if i < len(tokens) and tokens[i].kind == "punct" and tokens[i].text == "(":
            if i + 2 >= len(tokens) or tokens[i + 1].kind != "number" or tokens[i + 2].text != ")":
                return ()
            prefix = int(tokens[i + 1].text)
            i += 3
        if i < len(tokens) and tokens[i].is_word("ASC", "DESC"):
            i += 1
        if i < len(tokens):
            if tokens[i].text != ",":
                return ()
            i += 1
        out.append((tok.text.lower(), prefix))
    return tuple(out)


def index_shapes_query(schema: str, table: str) -> Statement:
    return Statement(
        "SELECT index_name, seq_in_index, column_name, sub_part, non_unique "
        "FROM information_schema.statistics WHERE table_schema = %s AND table_name = %s "
        "ORDER BY index_name, seq_in_index",
        (schema, table),
    )


def shapes_of(rows: Sequence[Any]) -> set[IndexShape]:
    """The shapes of a table's indexes from ``index_shapes_query``'s rows."""
    parts: dict[str, list[tuple[str, int | None]]] = {}
    unique: dict[str, bool] = {}
    for name, _seq, column, sub_part, non_unique in rows:
        key = str(name)
        sub = int(sub_part) if sub_part is not None else None
        parts.setdefault(key, []).append((str(column).lower(), sub))
        unique[key] = not int(non_unique)
    return {IndexShape(tuple(p), unique[k]) for k, p in parts.items()}
