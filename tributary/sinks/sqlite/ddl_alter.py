"""ALTER TABLE for SQLite: ADD/DROP/RENAME COLUMN, ADD INDEX/UNIQUE, DROP INDEX, RENAME TO.

Each comma-separated specification becomes its own SQLite statement, in order; a RENAME TO
makes the later ones apply to the new name, as in MySQL.
"""

from __future__ import annotations

from tributary.sinks.lexer import Cursor
from tributary.sinks.port import UnsupportedDdl
from tributary.sinks.sqlite.columns import DropColumn, Step, TableSteps, column, index_columns, q

_UNSUPPORTED_KEYS = (
    "PRIMARY",
    "CONSTRAINT",
    "FULLTEXT",
    "SPATIAL",
    "FOREIGN",
    "CHECK",
    "PARTITION",
)


def alter_table(cur: Cursor, table: TableSteps, schema: str) -> list[Step]:
    while True:
        _spec(cur, table, schema)
        if not cur.accept(","):
            return table.steps


def _spec(cur: Cursor, table: TableSteps, schema: str) -> None:
    tok = cur.peek()
    if cur.accept("ADD"):
        _add(cur, table)
    elif cur.accept("DROP"):
        if cur.accept("INDEX") or cur.accept("KEY"):
            table.steps.append(f"DROP INDEX IF EXISTS {q(table.name + '__' + cur.name())}")
        elif (p := cur.peek()) is not None and p.is_word(*_UNSUPPORTED_KEYS):
            raise UnsupportedDdl(f"ALTER TABLE DROP {p.text}")
        else:
            cur.accept("COLUMN")
            table.steps.append(DropColumn(table.name, cur.name()))
    elif cur.accept("RENAME", "COLUMN"):
        old = cur.name()
        cur.expect("TO")
        new = cur.name()
        table.steps.append(f"ALTER TABLE {q(table.name)} RENAME COLUMN {q(old)} TO {q(new)}")
    elif cur.accept("RENAME"):
        if (p := cur.peek()) is not None and p.is_word("INDEX", "KEY"):
            raise UnsupportedDdl("ALTER TABLE RENAME INDEX")
        cur.accept("TO") or cur.accept("AS")
        new = TableSteps(*cur.qualified(schema)).name
        table.steps.append(f"ALTER TABLE {q(table.name)} RENAME TO {q(new)}")
        table.name = new
    else:
        raise UnsupportedDdl(f"ALTER TABLE {tok.text if tok else ''} ...")


def _add(cur: Cursor, table: TableSteps) -> None:
    if cur.accept("UNIQUE"):
        cur.accept("KEY") or cur.accept("INDEX")
        table.index(*index_columns(cur), unique=True)
    elif cur.accept("INDEX") or cur.accept("KEY"):
        table.index(*index_columns(cur), unique=False)
    elif (p := cur.peek()) is not None and p.is_word(*_UNSUPPORTED_KEYS):
        raise UnsupportedDdl(f"ALTER TABLE ADD {p.text}")
    else:
        cur.accept("COLUMN")
        if not cur.accept("("):
            _add_column(cur, table)
            return
        while True:
            _add_column(cur, table)
            if not cur.accept(","):
                break
        cur.expect(")")


def _add_column(cur: Cursor, table: TableSteps) -> None:
    col = column(cur)
    if col.pk:
        raise UnsupportedDdl("adding a primary key column")
    table.steps.append(f"ALTER TABLE {q(table.name)} ADD COLUMN {col.sql(adding=True)}")
    if col.unique:
        table.index(col.name, [col.name], unique=True)
