"""MySQL DDL to SQLite, for the simple cases a replica needs; anything else is ``UnsupportedDdl``.

Supported: CREATE/DROP DATABASE, CREATE TABLE (columns, primary key, unique keys, indexes), DROP
TABLE, TRUNCATE, RENAME TABLE, CREATE/DROP INDEX, and ALTER TABLE with ADD/DROP/RENAME COLUMN,
ADD INDEX/UNIQUE, DROP INDEX and RENAME TO. Upstream ``schema.table`` is the SQLite table
``"schema__table"``; its index ``i`` is ``"schema__table__i"`` (SQLite index names are global).
Unique keys become unique indexes (not table constraints) so that DROP INDEX can remove them.

Worked example, schema ``shop``::

    CREATE TABLE t (id INT PRIMARY KEY, code VARCHAR(8) UNIQUE, price DECIMAL(10,2), KEY k (price))
    -> CREATE TABLE "shop__t" ("id" INTEGER, "code" TEXT, "price" TEXT, PRIMARY KEY ("id"))
       CREATE UNIQUE INDEX IF NOT EXISTS "shop__t__code" ON "shop__t" ("code")
       CREATE INDEX IF NOT EXISTS "shop__t__k" ON "shop__t" ("price")
"""

from __future__ import annotations

from tributary.change import Ddl
from tributary.sinks.lexer import Cursor
from tributary.sinks.port import UnsupportedDdl
from tributary.sinks.sqlite.columns import (
    DropColumn,
    DropSchema,
    Step,
    TableSteps,
    column,
    index_columns,
    q,
)
from tributary.sinks.sqlite.ddl_alter import alter_table

__all__ = ["DropColumn", "DropSchema", "Step", "translate"]


def translate(ddl: Ddl) -> list[Step]:
    """The SQLite statements (and schema drops) doing what ``ddl`` did upstream."""
    try:
        cur = Cursor(ddl.query)
        steps = _statement(cur, ddl.schema)
        if not cur.at_end():
            raise UnsupportedDdl(f"unexpected {cur.peek()}")
    except UnsupportedDdl as e:
        raise UnsupportedDdl(f"cannot apply DDL on SQLite: {e}: {ddl.query!r}") from e
    except (ValueError, IndexError) as e:
        raise UnsupportedDdl(f"cannot parse DDL for SQLite: {e}: {ddl.query!r}") from e
    return steps


def _statement(cur: Cursor, schema: str) -> list[Step]:
    if cur.accept("CREATE", "TABLE"):
        return _create_table(cur, schema)
    if cur.accept("CREATE", "DATABASE") or cur.accept("CREATE", "SCHEMA"):
        cur.pos = len(cur.tokens)  # nothing to create: tables are named schema__table
        return []
    if cur.accept("DROP", "DATABASE") or cur.accept("DROP", "SCHEMA"):
        cur.accept("IF", "EXISTS")
        return [DropSchema(cur.name())]
    if cur.accept("CREATE", "UNIQUE", "INDEX") or cur.accept("CREATE", "INDEX"):
        unique = cur.tokens[cur.pos - 2].is_word("UNIQUE")
        name = cur.name()
        cur.expect("ON")
        table = TableSteps(*cur.qualified(schema))
        table.index(name, index_columns(cur)[1], unique=unique)
        return table.steps
    if cur.accept("DROP", "INDEX"):
        cur.accept("IF", "EXISTS")
        name = cur.name()
        cur.expect("ON")
        return [f"DROP INDEX IF EXISTS {q(TableSteps(*cur.qualified(schema)).name + '__' + name)}"]
    if cur.accept("DROP", "TABLE") or cur.accept("DROP", "TEMPORARY", "TABLE"):
        return _drop_tables(cur, schema)
    if cur.accept("TRUNCATE"):
        cur.accept("TABLE")
        return [f"DELETE FROM {q(TableSteps(*cur.qualified(schema)).name)}"]
    if cur.accept("RENAME", "TABLE"):
        return _rename_tables(cur, schema)
    if cur.accept("ALTER", "TABLE"):
        return alter_table(cur, TableSteps(*cur.qualified(schema)), schema)
    raise UnsupportedDdl("statement not supported")


def _create_table(cur: Cursor, schema: str) -> list[Step]:
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    table = TableSteps(*cur.qualified(schema))
    if cur.accept("LIKE") or not cur.at("("):
        raise UnsupportedDdl("only CREATE TABLE with column definitions")
    cur.expect("(")
    defs: list[str] = []
    pk: list[str] = []
    while True:
        if (
            cur.accept("CONSTRAINT")
            and (p := cur.peek()) is not None
            and not p.is_word("PRIMARY", "UNIQUE", "FOREIGN", "CHECK")
        ):
            cur.name()
        if cur.accept("PRIMARY", "KEY"):
            pk = index_columns(cur)[1]
        elif cur.accept("UNIQUE"):
            cur.accept("KEY") or cur.accept("INDEX")
            table.index(*index_columns(cur), unique=True)
        elif cur.accept("KEY") or cur.accept("INDEX"):
            table.index(*index_columns(cur), unique=False)
        elif (p := cur.peek()) is not None and p.is_word("FULLTEXT", "SPATIAL", "FOREIGN", "CHECK"):
            _skip_definition(cur)
        else:
            col = column(cur)
            defs.append(col.sql())
            if col.pk:
                pk = [col.name]
            if col.unique:
                table.index(col.name, [col.name], unique=True)
        if not cur.accept(","):
            break
    cur.expect(")")
    cur.pos = len(cur.tokens)  # table options (ENGINE, CHARSET, COMMENT, PARTITION ...) ignored
    if pk:
        defs.append(f"PRIMARY KEY ({', '.join(q(c) for c in pk)})")
    ine = "IF NOT EXISTS " if if_not_exists else ""
    return [f"CREATE TABLE {ine}{q(table.name)} ({', '.join(defs)})", *table.steps]


def _skip_definition(cur: Cursor) -> None:
    while (tok := cur.peek()) is not None and not (tok.kind == "punct" and tok.text in ",)"):
        if cur.at("("):
            cur.skip_group()
        else:
            cur.next()


def _drop_tables(cur: Cursor, schema: str) -> list[Step]:
    if_exists = "IF EXISTS " if cur.accept("IF", "EXISTS") else ""
    steps: list[Step] = []
    while True:
        steps.append(f"DROP TABLE {if_exists}{q(TableSteps(*cur.qualified(schema)).name)}")
        if not cur.accept(","):
            break
    cur.accept("RESTRICT") or cur.accept("CASCADE")
    return steps


def _rename_tables(cur: Cursor, schema: str) -> list[Step]:
    steps: list[Step] = []
    while True:
        old = TableSteps(*cur.qualified(schema)).name
        cur.expect("TO")
        new = TableSteps(*cur.qualified(schema)).name
        steps.append(f"ALTER TABLE {q(old)} RENAME TO {q(new)}")
        if not cur.accept(","):
            break
    return steps
