"""How the checker plans a table pair (key, chunking, pushdown), filters tables and renders
chunk conditions."""

from __future__ import annotations

import pytest

from tributary.checker.canon import Canon
from tributary.checker.chunks import Chunk, above, at_most, chunk_where, chunks_from
from tributary.checker.coltypes import mysql_type, sqlite_type
from tributary.checker.errors import UsageError
from tributary.checker.filter import TableFilter
from tributary.checker.model import Column, Shape, TableName
from tributary.checker.pairing import plan
from tributary.checker.source import KeyTerm

NAME = TableName("db", "t")


def my(name: str, declared: str, *, nullable: bool = False, collation: str = "") -> Column:
    return Column(name, mysql_type(declared), declared, nullable, collation)


def lite(name: str, declared: str) -> Column:
    return Column(name, sqlite_type(declared), declared)


def test_mysql_vs_sqlite_uses_the_mysql_types_and_key() -> None:
    up = Shape(NAME, (my("id", "decimal(10,2)"), my("v", "datetime(3)", nullable=True)), ("id",))
    down = Shape(NAME, (lite("id", "TEXT"), lite("v", "TEXT"), lite("w", "INTEGER")), ("id",))
    p = plan(up, down, "mysql", "sqlite")
    assert p.columns == ("id", "v") and p.only_down == ("w",) and p.only_up == ()
    assert p.types == (mysql_type("decimal(10,2)"), mysql_type("datetime(3)"))
    assert (p.key, p.key_kind, p.chunked, p.pushdown) == (("id",), "primary key", True, False)
    # The other way round too: the MySQL side's types win.
    assert plan(down, up, "sqlite", "mysql").types == p.types


@pytest.mark.parametrize(
    ("declared", "collation", "chunked"),
    [
        ("varchar(10)", "utf8mb4_bin", True),
        ("varchar(10)", "utf8mb4_general_ci", False),  # SQLite cannot order like _ci
        ("enum('b','a')", "utf8mb4_bin", False),  # MySQL orders ENUM by index
        ("double", "", False),
        ("time(2)", "", True),
        ("bigint(20) unsigned", "", True),
    ],
)
def test_chunking_across_engines_needs_the_same_key_order(
    declared: str, collation: str, chunked: bool
) -> None:
    up = Shape(NAME, (my("k", declared, collation=collation),), ("k",))
    down = Shape(NAME, (lite("k", "TEXT"),), ("k",))
    p = plan(up, down, "mysql", "sqlite")
    assert p.chunked is chunked
    assert bool(p.notes) is not chunked


def test_mysql_pair_chunks_and_pushes_down_only_on_identical_columns() -> None:
    ci = "utf8mb4_general_ci"
    up = Shape(NAME, (my("k", "varchar(5)", collation=ci), my("v", "int")), ("k",))
    same = plan(up, up, "mysql", "mysql")
    assert same.chunked and same.pushdown
    other = Shape(NAME, (my("k", "varchar(5)", collation=ci), my("v", "bigint")), ("k",))
    p = plan(up, other, "mysql", "mysql")
    assert p.chunked and not p.pushdown
    recollated = Shape(NAME, (my("k", "varchar(5)", collation="utf8mb4_bin"), my("v", "int")))
    assert not plan(up, recollated, "mysql", "mysql").chunked
    narrow = Shape(NAME, (my("k", "int"),), ("k",))
    wide = Shape(NAME, (my("k", "bigint(20)"),), ("k",))
    assert plan(narrow, wide, "mysql", "mysql").chunked  # integers compare by value
    text = Shape(NAME, (my("k", "varchar(5)", collation="utf8mb4_bin"),), ("k",))
    assert not plan(narrow, text, "mysql", "mysql").chunked


def test_key_falls_back_to_unique_then_all_columns() -> None:
    cols = (my("a", "int"), my("b", "int"))
    unique = Shape(NAME, cols, (), (("b",),))
    p = plan(unique, Shape(NAME, cols), "mysql", "mysql")
    assert (p.key, p.key_kind, p.key_index) == (("b",), "unique key", (1,))
    p = plan(Shape(NAME, cols), Shape(NAME, cols), "mysql", "mysql")
    assert (p.key, p.key_kind, p.chunked) == ((), "all columns", False)
    # A key column missing on one side cannot identify rows there.
    down = Shape(NAME, (my("a", "int"),), ("a",))
    p = plan(Shape(NAME, cols, ("b",)), down, "mysql", "mysql")
    assert p.key == ("a",) and p.only_up == ("b",)


def test_table_filter() -> None:
    f = TableFilter.of(["bank.accounts", "shop.*", "~^log\\.2024"], ["shop.secret"])
    ok = ["bank.accounts", "shop.orders", "log.2024_01"]
    no = ["bank.other", "shop.secret", "log.2023", "shopx.t", "xlog.2024"]
    assert [f(TableName(*n.split("."))) for n in ok] == [True] * 3
    assert [f(TableName(*n.split("."))) for n in no] == [False] * 5
    assert TableFilter.of(None, None)(TableName("any", "t"))
    with pytest.raises(UsageError):
        TableFilter.of(["~("], None)
    with pytest.raises(UsageError):
        TableFilter.of("db.t", None)  # a str is a sequence, but surely a mistake


def _term(name: str) -> KeyTerm:
    def bind(v: Canon) -> object:
        return v

    return KeyTerm(name, "?", bind)


def test_chunk_conditions() -> None:
    terms = [_term("a"), _term("b")]
    gt = above(terms, (1, "x"))
    assert gt.sql == "(a > ? OR (a = ? AND (b > ?)))" and gt.args == (1, 1, "x")
    le = at_most(terms, (3, "y"))
    assert le.sql == "(a < ? OR (a = ? AND (b <= ?)))" and le.args == (3, 3, "y")
    assert at_most(terms[:1], (3,)).sql == "a <= ?"
    chunks = chunks_from([(1, "x"), (3, "y")])
    assert chunks == [
        Chunk(0, None, (1, "x")),
        Chunk(1, (1, "x"), (3, "y")),
        Chunk(2, (3, "y"), None),
    ]
    middle = chunk_where(terms, chunks[1])
    assert middle.sql == f"({gt.sql}) AND ({le.sql})" and middle.args == gt.args + le.args
    assert chunk_where(terms, chunks_from([])[0]).sql == ""
    assert chunks[1].describe(("a", "b")) == "(a=1, b='x') < key <= (a=3, b='y')"
