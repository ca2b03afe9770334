"""Column, type and index definitions of MySQL DDL, translated to SQLite (see ``ddl``).

Invariant: the SQLite table stores exactly the values the upstream rows carry. So NOT NULL,
AUTO_INCREMENT, ON UPDATE and non-literal defaults are dropped (values always come from upstream),
and types map to affinities that keep the values as the translator formats them: integers INTEGER,
floats REAL, decimals and temporal types TEXT (so ``'1.50'`` keeps its scale), binary BLOB, and
``bigint unsigned`` BLOB (no conversion: values past 2^63 are stored as their decimal text). An
added NOT NULL column gets the literal default, else MySQL's implicit one (0, '', zero date), since
upstream filled the existing rows with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.sinks.lexer import Cursor, Token
from tributary.sinks.port import UnsupportedDdl
from tributary.sql import SQLITE, quote, sqlite_name

_INTS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bool", "boolean", "bit"}
_INTS |= {"year", "int1", "int2", "int3", "int4", "int8", "middleint", "serial"}
_REALS = {"float", "double", "real", "float4", "float8"}
_DECIMALS = {"decimal", "numeric", "dec", "fixed"}
_TEXTS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "set", "json", "enum"}
_TEXTS |= {"nchar", "nvarchar", "character", "varcharacter"}
_TEMPORAL = {"date": "0000-00-00", "datetime": "0000-00-00 00:00:00", "time": "00:00:00"}
_TEMPORAL["timestamp"] = _TEMPORAL["datetime"]
_BLOBS = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}


@dataclass(frozen=True, slots=True)
class DropSchema:
    """Drop every table of ``schema`` (the sink lists them: tables named ``schema__*``)."""

    schema: str


@dataclass(frozen=True, slots=True)
class DropColumn:
    """Drop ``column`` of SQLite table ``table``, and first the indexes that use it (MySQL takes
    the column out of them; SQLite refuses to drop an indexed column)."""

    table: str
    column: str


Step = str | DropSchema | DropColumn


def q(name: str) -> str:
    return quote(SQLITE, name, params=False)


def lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass
class Column:
    name: str
    affinity: str
    implicit: str  # MySQL's implicit default of a NOT NULL column, as an SQLite literal
    default: str | None = None
    not_null: bool = False
    pk: bool = False
    unique: bool = False

    def sql(self, *, adding: bool = False) -> str:
        default = (
            self.default
            if self.default is not None or not adding or not self.not_null
            else self.implicit
        )
        return f"{q(self.name)} {self.affinity}" + (
            f" DEFAULT {default}" if default is not None else ""
        )


def column_type(cur: Cursor) -> tuple[str, str]:
    """The SQLite affinity and implicit default of the MySQL type at the cursor."""
    word = cur.name().lower()
    if word == "double":
        cur.accept("PRECISION")
    args = cur.skip_group() if cur.at("(") else []
    unsigned = False
    while (tok := cur.peek()) is not None and tok.is_word("UNSIGNED", "SIGNED", "ZEROFILL"):
        unsigned |= cur.next().is_word("UNSIGNED")
    if word in _INTS:
        return (
            "BLOB"
            if word in ("bigint", "int8", "serial") and (unsigned or word == "serial")
            else "INTEGER"
        ), "0"
    if word in _REALS:
        return "REAL", "0"
    if word in _DECIMALS:
        scale = int(args[2].text) if len(args) >= 3 and args[2].kind == "number" else 0
        return "TEXT", lit("0." + "0" * scale if scale else "0")
    if word in _TEMPORAL:
        fsp = int(args[0].text) if args and args[0].kind == "number" and word != "date" else 0
        return "TEXT", lit(_TEMPORAL[word] + ("." + "0" * fsp if fsp else ""))
    if word in _TEXTS:
        first = next((t.text for t in args if t.kind == "string"), "")
        return "TEXT", {"enum": lit(first), "json": "'null'"}.get(word, "''")
    if word in _BLOBS:
        return "BLOB", "X''"
    raise UnsupportedDdl(f"no SQLite mapping for MySQL type {word!r}")


def default_literal(cur: Cursor, affinity: str) -> str | None:
    """A literal DEFAULT as an SQLite literal; None for expressions (dropped)."""
    tok = cur.next()
    if (
        tok.kind == "word"
        and tok.text.startswith("_")
        and (nxt := cur.peek())
        and nxt.kind == "string"
    ):
        tok = cur.next()  # a charset introducer: _utf8mb4'x'
    sign = ""
    if tok.kind == "punct" and tok.text in "+-":
        sign, tok = ("-" if tok.text == "-" else ""), cur.next()
    if tok.kind == "string":
        return lit(tok.text)
    if tok.kind == "number":
        return lit(sign + tok.text) if affinity == "TEXT" else sign + tok.text
    if tok.is_word("NULL"):
        return "NULL"
    if tok.is_word("TRUE", "FALSE"):
        return "1" if tok.is_word("TRUE") else "0"
    if tok.is_word("B") and (nxt := cur.peek()) is not None and nxt.kind == "string":
        return str(int(cur.next().text or "0", 2))
    if tok.kind == "punct" and tok.text == "(":
        cur.pos -= 1
        cur.skip_group()
    elif cur.at("("):
        cur.skip_group()  # CURRENT_TIMESTAMP(3), NOW()
    return None


def column(cur: Cursor) -> Column:
    name = cur.name()
    col = Column(name, *column_type(cur))
    while (tok := cur.peek()) is not None and not (tok.kind == "punct" and tok.text in ",)"):
        if cur.accept("NOT", "NULL"):
            col.not_null = True
        elif cur.accept("DEFAULT"):
            col.default = default_literal(cur, col.affinity)
        elif cur.accept("PRIMARY", "KEY") or cur.accept("KEY"):
            col.pk = True
        elif cur.accept("UNIQUE"):
            cur.accept("KEY")
            col.unique = True
        elif cur.accept("ON", "UPDATE") or cur.accept("COMMENT") or cur.accept("COLLATE"):
            cur.next()
            if cur.at("("):
                cur.skip_group()
        elif cur.accept("CHARACTER", "SET") or cur.accept("CHARSET"):
            cur.next()
        elif tok.kind == "punct" and tok.text == "(":
            cur.skip_group()  # GENERATED ALWAYS AS (expr), REFERENCES t (c), AUTO_RANDOM(5)
        else:
            cur.next()  # AUTO_INCREMENT, NULL, VIRTUAL, FIRST, AFTER c, ...
    return col


def index_columns(cur: Cursor) -> tuple[str | None, list[str]]:
    """``[name] [USING x] (col[(len)] [ASC|DESC], ...)`` -> (name, columns)."""
    name = None if cur.at("(") or (p := cur.peek()) is None or p.is_word("USING") else cur.name()
    if cur.accept("USING"):
        cur.next()
    cols: list[str] = []
    groups: list[list[Token]] = [[]]
    for tok in cur.skip_group():
        if tok.kind == "punct" and tok.text == ",":
            groups.append([])
        else:
            groups[-1].append(tok)
    for g in groups:
        if not g or g[0].kind not in ("word", "qident"):
            raise UnsupportedDdl("expression indexes are not supported on SQLite")
        cols.append(g[0].text)
    while (opt := cur.peek()) is not None and not (opt.kind == "punct" and opt.text in ",)"):
        cur.next()  # index options: USING BTREE, COMMENT '', VISIBLE, CLUSTERED, ...
    return name, cols


class TableSteps:
    """Where the statements of one table are collected (index names made unique per table)."""

    def __init__(self, schema: str, table: str) -> None:
        self.name = sqlite_name(schema, table)
        self.steps: list[Step] = []
        self._index_names: set[str] = set()

    def index(self, name: str | None, cols: list[str], *, unique: bool) -> None:
        base = name or cols[0]
        name, n = base, 1
        while name in self._index_names:
            n += 1
            name = f"{base}_{n}"
        self._index_names.add(name)
        kind = "UNIQUE INDEX" if unique else "INDEX"
        self.steps.append(
            f"CREATE {kind} IF NOT EXISTS {q(self.name + '__' + name)} ON {q(self.name)} "
            f"({', '.join(q(c) for c in cols)})"
        )
