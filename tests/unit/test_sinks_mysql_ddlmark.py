"""Which DDLs add indexes without names (``sinks.mysql.ddlmark.unnamed_indexes``), and the
shapes of a table's indexes from ``information_schema.statistics`` rows."""

from __future__ import annotations

import pytest

from tributary.change import Ddl
from tributary.sinks.mysql.ddlmark import IndexShape, UnnamedIndexes, shapes_of, unnamed_indexes


def adds(query: str) -> UnnamedIndexes | None:
    return unnamed_indexes(Ddl("shop", query))


def test_unnamed_index_additions_give_table_columns_and_uniqueness() -> None:
    got = adds("ALTER TABLE t ADD INDEX (a), ADD UNIQUE (b(8) DESC, `C`)")
    assert got == UnnamedIndexes(
        "shop",
        "t",
        (
            IndexShape((("a", None),), unique=False),
            IndexShape((("b", 8), ("c", None)), unique=True),
        ),
    )
    got = adds("alter table other.`t 2` add key using btree (a) comment 'x', add unique key (b);")
    assert got is not None
    assert (got.schema, got.table) == ("other", "t 2")
    assert [s.unique for s in got.shapes] == [False, True]


@pytest.mark.parametrize(
    "query",
    [
        "ALTER TABLE t ADD INDEX ia (a)",  # named: a replay fails with 1061
        "ALTER TABLE t ADD INDEX IF NOT EXISTS ia (a)",
        "ALTER TABLE t ADD INDEX (a), ADD COLUMN c INT",  # a replay fails with 1060
        "ALTER TABLE t ADD INDEX ((a + 1))",  # an expression
        "ALTER TABLE t ADD PRIMARY KEY (a)",
        "ALTER TABLE t ADD CONSTRAINT UNIQUE (a)",
        "CREATE INDEX ia ON t (a)",
        "ALTER TABLE t DROP INDEX a",
        "ALTER TABLE t ADD INDEX (a",  # not even a statement
    ],
)
def test_anything_else_is_none(query: str) -> None:
    assert adds(query) is None


def test_shapes_of_statistics_rows() -> None:
    rows = [
        ("PRIMARY", 1, "id", None, 0),
        ("v", 1, "V", None, 1),
        ("v_2", 1, "v", None, 1),
        ("ab", 1, "a", 10, 0),
        ("ab", 2, "b", None, 0),
    ]
    assert shapes_of(rows) == {
        IndexShape((("id", None),), unique=True),
        IndexShape((("v", None),), unique=False),
        IndexShape((("a", 10), ("b", None)), unique=True),
    }
