"""Column defaults learnt from the DDL a changefeed carries, for the debezium protocol's schemas.

Debezium's field schemas carry a column's ``default``; a consumer such as Debezium's JDBC sink
uses it when it creates a table or adds a column (``ALTER TABLE ... ADD COLUMN c INT NOT NULL
DEFAULT 7`` fills the existing rows with 7, as the upstream did). A binlog row image has no
defaults, so the sink reads them from the DDL statements it is sent: CREATE TABLE, ALTER TABLE
ADD/MODIFY/CHANGE/ALTER/DROP/RENAME COLUMN and RENAME TO, RENAME TABLE, DROP TABLE and DROP
DATABASE. Only literal defaults are kept (a number, a string, ``b'101'``, TRUE/FALSE);
``DEFAULT NULL`` and expressions (CURRENT_TIMESTAMP, ``(uuid())``) leave no default.

Invariant: what is known comes from statements seen since the sink opened; a column whose
defining DDL came before (a restart past it) has no default in its schema until a DDL names it
again. A statement that cannot be read changes nothing.

Example: after ``ALTER TABLE shop.t ADD COLUMN n INT NOT NULL DEFAULT 7, ADD note VARCHAR(9)
DEFAULT 'new'``, ``defaults.of("shop", "t")`` is ``{"n": "7", "note": "new"}``.
"""

from __future__ import annotations

import logging

from tributary.change import Ddl
from tributary.sinks.lexer import Cursor

log = logging.getLogger(__name__)

Defaults = dict[str, str]  # column -> its literal default, as text


class DefaultsFromDdl:
    """Per table, the literal defaults its columns were given by the DDL seen so far."""

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str], Defaults] = {}

    def of(self, schema: str, table: str) -> Defaults:
        return self._tables.get((schema, table), {})

    def observe(self, ddl: Ddl) -> None:
        try:
            _statement(Cursor(ddl.query), ddl.schema, self._tables)
        except (ValueError, IndexError) as e:
            log.debug("defaults: cannot read %r: %s", ddl.query, e)


def _statement(cur: Cursor, schema: str, tables: dict[tuple[str, str], Defaults]) -> None:
    if cur.accept("CREATE"):
        cur.accept("OR", "REPLACE")
        if not cur.accept("TABLE"):
            return
        cur.accept("IF", "NOT", "EXISTS")
        name = cur.qualified(schema)
        tables[name] = _create(cur) if cur.accept("(") else {}
    elif cur.accept("ALTER"):
        while cur.accept("ONLINE") or cur.accept("IGNORE"):
            pass
        if cur.accept("TABLE"):
            _alter(cur, cur.qualified(schema), tables)
    elif cur.accept("RENAME", "TABLE") or cur.accept("RENAME", "TABLES"):
        while True:
            old = cur.qualified(schema)
            cur.expect("TO")
            tables[cur.qualified(schema)] = tables.pop(old, {})
            if not cur.accept(","):
                return
    elif cur.accept("DROP", "TABLE") or cur.accept("DROP", "TEMPORARY", "TABLE"):
        cur.accept("IF", "EXISTS")
        while True:
            tables.pop(cur.qualified(schema), None)
            if not cur.accept(","):
                return
    elif cur.accept("DROP", "DATABASE") or cur.accept("DROP", "SCHEMA"):
        cur.accept("IF", "EXISTS")
        gone = cur.name()
        for name in [n for n in tables if n[0] == gone]:
            del tables[name]


_CONSTRAINTS = ("PRIMARY", "KEY", "INDEX", "UNIQUE", "CONSTRAINT", "FOREIGN", "CHECK", "FULLTEXT")


def _create(cur: Cursor) -> Defaults:
    found: Defaults = {}
    while not cur.accept(")"):
        tok = cur.peek()
        if tok is not None and tok.kind == "word" and tok.is_word(*_CONSTRAINTS, "SPATIAL"):
            _skip_definition(cur)
        else:
            _column(cur, found)
        cur.accept(",")
    return found


def _skip_definition(cur: Cursor) -> None:
    while (tok := cur.peek()) is not None and not (tok.kind == "punct" and tok.text in ",)"):
        if tok.kind == "punct" and tok.text == "(":
            cur.skip_group()
        else:
            cur.next()


def _column(cur: Cursor, into: Defaults, name: str | None = None) -> None:
    """A column definition at the cursor: its default (if a literal) goes into ``into``."""
    name = name or cur.name()
    into.pop(name, None)
    while (tok := cur.peek()) is not None and not (tok.kind == "punct" and tok.text in ",)"):
        if cur.accept("DEFAULT"):
            value = _literal(cur)
            if value is not None:
                into[name] = value
        elif tok.kind == "punct" and tok.text == "(":
            cur.skip_group()
        else:
            cur.next()


def _literal(cur: Cursor) -> str | None:
    tok = cur.next()
    if tok.kind == "word" and tok.text.startswith("_") and (nxt := cur.peek()) is not None:
        if nxt.kind == "string":
            tok = cur.next()  # a charset introducer: _utf8mb4'x'
    sign = ""
    if tok.kind == "punct" and tok.text in "+-":
        sign, tok = ("-" if tok.text == "-" else ""), cur.next()
    if tok.kind == "string":
        return tok.text
    if tok.kind == "number":
        return sign + tok.text
    if tok.is_word("TRUE", "FALSE"):
        return "1" if tok.is_word("TRUE") else "0"
    if tok.is_word("B") and (nxt := cur.peek()) is not None and nxt.kind == "string":
        return str(int(cur.next().text or "0", 2))
    if tok.kind == "punct" and tok.text == "(":
        cur.pos -= 1
        cur.skip_group()
    elif cur.at("("):
        cur.skip_group()  # CURRENT_TIMESTAMP(3), NOW()
    return None  # NULL, CURRENT_TIMESTAMP, an expression: no literal default


def _alter(cur: Cursor, name: tuple[str, str], tables: dict[tuple[str, str], Defaults]) -> None:
    table = tables.setdefault(name, {})
    while not cur.at_end():
        if cur.accept("ADD"):
            if (tok := cur.peek()) is not None and tok.is_word(*_CONSTRAINTS, "SPATIAL"):
                _skip_definition(cur)
            else:
                cur.accept("COLUMN")
                cur.accept("IF", "NOT", "EXISTS")
                if cur.accept("("):
                    _create_columns(cur, table)
                else:
                    _column(cur, table)
        elif cur.accept("MODIFY"):
            cur.accept("COLUMN")
            cur.accept("IF", "EXISTS")
            _column(cur, table)
        elif cur.accept("CHANGE"):
            cur.accept("COLUMN")
            cur.accept("IF", "EXISTS")
            table.pop(cur.name(), None)
            _column(cur, table)
        elif cur.accept("ALTER"):
            cur.accept("COLUMN")
            column = cur.name()
            if cur.accept("SET", "DEFAULT"):
                value = _literal(cur)
                table.pop(column, None)
                if value is not None:
                    table[column] = value
            else:
                table.pop(column, None)  # DROP DEFAULT
                _skip_definition(cur)
        elif cur.accept("DROP", "COLUMN") or _drops_column(cur):
            cur.accept("IF", "EXISTS")
            table.pop(cur.name(), None)
        elif cur.accept("RENAME", "COLUMN"):
            old = cur.name()
            cur.expect("TO")
            moved = table.pop(old, None)
            if moved is not None:
                table[cur.name()] = moved
            else:
                cur.name()
        elif cur.accept("RENAME"):
            cur.accept("TO") or cur.accept("AS")
            tables[cur.qualified(name[0])] = tables.pop(name, {})
            name = (name[0], "")
            table = {}
        else:
            _skip_definition(cur)
        if not cur.accept(","):
            break


def _drops_column(cur: Cursor) -> bool:
    """``DROP c`` (a column: not DROP INDEX/KEY/PRIMARY/FOREIGN/CHECK/CONSTRAINT)."""
    tok, nxt = cur.peek(), cur.peek(1)
    if tok is None or not tok.is_word("DROP"):
        return False
    if nxt is None or nxt.is_word(*_CONSTRAINTS, "DEFAULT", "PARTITION", "SYSTEM"):
        return False
    cur.next()
    return True


def _create_columns(cur: Cursor, table: Defaults) -> None:
    while True:
        _column(cur, table)
        if not cur.accept(","):
            break
    cur.expect(")")
