"""services.spark.splits: literals, predicate text, and split points that cover every row once.

The coverage property runs the generated SQL on SQLite for keys whose literals SQLite reads the
same way (integers, binary strings as ``X'..'``); the MySQL-only forms (charset introducers,
COLLATE) are checked as text here and on a real MariaDB in tests/integration.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.spark.splits import (
    Cells,
    KeyColumn,
    SplitError,
    boundary_sql,
    ident,
    predicates,
    split_points,
    splittable,
    string_literal,
)

Rows = list[tuple[str | None, ...]]
A = KeyColumn("a", "int")
B_CI = KeyColumn("b", "varchar", "utf8mb4", "utf8mb4_general_ci")


def test_worked_example_of_the_module_docstring() -> None:
    bounds = [("2", "61"), ("4", "79")]
    lit_a = "_utf8mb4 X'61' COLLATE utf8mb4_general_ci"
    lit_y = "_utf8mb4 X'79' COLLATE utf8mb4_general_ci"
    assert predicates([A, B_CI], bounds) == [
        f"(`a` < 2 OR (`a` = 2 AND `b` < {lit_a}))",
        f"(`a` > 2 OR (`a` = 2 AND `b` >= {lit_a})) AND (`a` < 4 OR (`a` = 4 AND `b` < {lit_y}))",
        f"(`a` > 4 OR (`a` = 4 AND `b` >= {lit_y}))",
    ]


def test_no_bounds_is_one_range_of_everything() -> None:
    assert predicates([A], []) == ["1 = 1"]


def test_single_column_ranges_are_half_open() -> None:
    assert predicates([A], [("-10",)]) == ["`a` < -10", "`a` >= -10"]
    assert predicates([A], [("1",), ("9",)]) == ["`a` < 1", "`a` >= 1 AND `a` < 9", "`a` >= 9"]


@pytest.mark.parametrize(
    ("column", "cell", "literal"),
    [
        (KeyColumn("k", "bigint"), "-9223372036854775808", "-9223372036854775808"),
        (KeyColumn("k", "bigint"), "18446744073709551615", "18446744073709551615"),
        (KeyColumn("k", "decimal"), "-12.3400", "-12.3400"),
        (KeyColumn("k", "year"), "2024", "2024"),
        (KeyColumn("k", "varbinary"), "00275C", "X'00275C'"),
        (KeyColumn("k", "binary"), "", "X''"),
        (
            KeyColumn("k", "char", "latin1", "latin1_swedish_ci"),
            "4F27",
            "_latin1 X'4F27' COLLATE latin1_swedish_ci",
        ),
        (KeyColumn("k", "datetime"), "2024-02-29 23:59:59.000001", "'2024-02-29 23:59:59.000001'"),
        (KeyColumn("k", "timestamp"), "1970-01-01 00:00:01", "'1970-01-01 00:00:01'"),
        (KeyColumn("k", "date"), "0000-00-00", "'0000-00-00'"),
        (KeyColumn("k", "time"), "-838:59:59.000000", "'-838:59:59.000000'"),
    ],
)
def test_literals_are_exact(column: KeyColumn, cell: str, literal: str) -> None:
    assert column.literal(cell) == literal


@pytest.mark.parametrize(
    ("column", "cell"),
    [
        (KeyColumn("k", "int"), "1 OR 1=1"),
        (KeyColumn("k", "int"), "1.5"),
        (KeyColumn("k", "decimal"), "1e5"),
        (KeyColumn("k", "varbinary"), "ABC"),  # odd: not whole bytes
        (KeyColumn("k", "varchar", "utf8mb4", "utf8mb4_bin"), "6G"),
        (KeyColumn("k", "datetime"), "2024-01-01' OR '1"),
        (KeyColumn("k", "varchar", "utf8mb4", "x COLLATE y"), "61"),
        (KeyColumn("k", "double"), "1.5"),
        (KeyColumn("k", "enum"), "a"),
    ],
)
def test_unsafe_or_inexact_cells_are_refused(column: KeyColumn, cell: str) -> None:
    with pytest.raises(SplitError):
        column.literal(cell)


def test_cells_are_selected_as_exact_text() -> None:
    assert B_CI.cell_sql() == "HEX(`b`)"
    assert KeyColumn("x`y", "varbinary").cell_sql() == "HEX(`x``y`)"
    assert KeyColumn("d", "datetime").cell_sql() == "CAST(`d` AS CHAR)"
    assert A.cell_sql() == "CAST(`a` AS CHAR)"


def test_unsupported_types_are_not_split() -> None:
    assert splittable([A, B_CI])
    assert not splittable([A, KeyColumn("f", "float")])
    assert not splittable([])
    calls: list[str] = []

    def query(sql: str) -> list[tuple[str | None, ...]]:
        calls.append(sql)
        return [("a",)]

    assert split_points(query, "t", [KeyColumn("e", "enum")], 9, 3) == []
    assert calls == []


def test_names_are_quoted() -> None:
    assert ident("a`b") == "`a``b`"
    assert string_literal("it's") == "'it''s'"
    assert string_literal("a\\'") == "_utf8mb4 X'615C27'"


def test_boundary_queries_walk_the_key_once() -> None:
    # 10 rows, 3 partitions: step 4; the first boundary at offset 4, the next 3 rows after it.
    seen: list[str] = []
    answers: Iterator[Rows] = iter([[("4",)], [("8",)]])

    def query(sql: str) -> list[tuple[str | None, ...]]:
        seen.append(sql)
        return next(answers)

    assert split_points(query, "`t`", [A], 10, 3) == [("4",), ("8",)]
    assert seen == [
        "SELECT CAST(`a` AS CHAR) FROM `t` ORDER BY `a` LIMIT 1 OFFSET 4",
        "SELECT CAST(`a` AS CHAR) FROM `t` WHERE `a` > 4 ORDER BY `a` LIMIT 1 OFFSET 3",
    ]


def test_boundaries_stop_at_the_end_of_the_table() -> None:
    answers: Iterator[Rows] = iter([[("4",)], []])
    assert split_points(lambda sql: next(answers), "`t`", [A], 10, 4) == [("4",)]


def test_null_key_cell_is_an_error() -> None:
    with pytest.raises(SplitError):
        split_points(lambda sql: [(None,)], "`t`", [A], 10, 2)


def test_boundary_sql_of_a_composite_key() -> None:
    after: Cells = ("3", "6162")
    assert boundary_sql("`s`.`t`", [A, B_CI], after, 2) == (
        "SELECT CAST(`a` AS CHAR), HEX(`b`) FROM `s`.`t` WHERE (`a` > 3 OR (`a` = 3 AND `b` > "
        "_utf8mb4 X'6162' COLLATE utf8mb4_general_ci)) ORDER BY `a`, `b` LIMIT 1 OFFSET 2"
    )


KEY = [KeyColumn("a", "bigint"), KeyColumn("b", "varbinary")]


@settings(max_examples=60, deadline=None)
@given(
    keys=st.sets(
        st.tuples(st.integers(-3, 3), st.binary(min_size=0, max_size=3)), min_size=0, max_size=60
    ),
    partitions=st.integers(1, 7),
)
def test_ranges_cover_every_row_exactly_once(keys: set[tuple[int, bytes]], partitions: int) -> None:
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE TABLE t (a INTEGER NOT NULL, b BLOB NOT NULL, PRIMARY KEY (a, b))")
        db.executemany("INSERT INTO t VALUES (?, ?)", sorted(keys))

        def query(sql: str) -> list[tuple[str | None, ...]]:
            return [tuple(None if c is None else str(c) for c in r) for r in db.execute(sql)]

        bounds = split_points(query, "t", KEY, len(keys), partitions)
        where = predicates(KEY, bounds)
        parts = [[tuple(r) for r in db.execute(f"SELECT a, b FROM t WHERE {w}")] for w in where]
    finally:
        db.close()
    read = [k for part in parts for k in part]
    assert sorted(read) == sorted(keys)  # every row, none twice
    if len(keys) < 2 or partitions < 2:
        assert where == ["1 = 1"]
        return
    step = -(-len(keys) // partitions)  # ceil(rows / partitions)
    assert len(where) == -(-len(keys) // step) <= partitions
    assert all(0 < len(p) <= step for p in parts)  # balanced, and no range is empty
