"""The change model's value objects (key flags, row identity, validation) and the sinks' batch
ordering (``sinks.pending``)."""

from __future__ import annotations

import pytest

from tributary.change import (
    ColumnInfo,
    Ddl,
    RowChange,
    RowKind,
    SqlValue,
    TableInfo,
    Txn,
    UniqueKey,
)
from tributary.sinks import SinkError, UnsupportedDdl, pending

T = TableInfo.build(
    "shop",
    "orders",
    [("id", "bigint"), ("code", "varchar(8)"), ("region", "int"), ("seq", "int"), ("note", "text")],
    unique_keys={"uk_code": ["code"], "uk_region_seq": ["region", "seq"]},
)


def test_build_derives_column_flags_from_keys() -> None:
    t = TableInfo.build("s", "t", [("a", "int"), ("b", "int")], ["a"], {"u": ["a", "b"]})
    assert t.column("a") == ColumnInfo("a", "int", is_pk=True, unique_keys=frozenset({"u"}))
    assert t.column("b").in_unique_key and not t.column("b").is_pk
    assert t.unique_keys == (UniqueKey("u", ("a", "b")),)
    assert t.qualified == "s.t" and t.column_names == ("a", "b")


def test_inconsistent_tables_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown columns"):
        TableInfo.build("s", "t", [("a", "int")], ["b"])
    with pytest.raises(ValueError, match="flags disagree"):
        TableInfo("s", "t", (ColumnInfo("a", "int", is_pk=True),))
    with pytest.raises(ValueError, match="duplicate"):
        TableInfo.build("s", "t", [("a", "int"), ("a", "int")])


def test_where_columns_prefers_pk_then_first_complete_unique_key_then_all() -> None:
    with_pk = TableInfo.build("s", "t", [("a", "int"), ("b", "int")], ["a"], {"u": ["b"]})
    assert with_pk.where_columns({"a": 1, "b": None}) == ("a",)
    row: dict[str, SqlValue] = {"id": 1, "code": "x", "region": 1, "seq": 2, "note": None}
    assert T.where_columns(row) == ("code",)
    assert T.where_columns({**row, "code": None}) == ("region", "seq")
    assert T.where_columns({**row, "code": None, "seq": None}) == T.column_names
    assert T.where_columns({"id": 1, "note": "n"}) == ("id", "note")


def test_row_changes_check_kind_and_columns() -> None:
    up = RowChange.update(T, {"id": 1}, {"id": 2})
    assert (up.kind, up.values, up.old_values) == (RowKind.UPDATE, {"id": 2}, {"id": 1})
    assert RowChange.delete(T, {"id": 1}).old_values is None
    with pytest.raises(ValueError):
        RowChange(RowKind.UPDATE, T, {"id": 1})
    with pytest.raises(ValueError):
        RowChange(RowKind.INSERT, T, {"id": 1}, {"id": 0})
    with pytest.raises(ValueError, match=r"unknown columns \['nope'\]"):
        RowChange.insert(T, {"nope": 1})
    with pytest.raises(ValueError, match=r"unknown columns \['x'\]"):
        RowChange.update(T, {"id": 1, "x": 0}, {"id": 1})


def test_decoded_row_changes_skip_the_checks_and_equal_checked_ones() -> None:
    old: dict[str, SqlValue] = {"id": 1, "note": "a"}
    new: dict[str, SqlValue] = {"id": 1, "note": "b"}
    decoded = RowChange.decoded(RowKind.UPDATE, T, new, old)
    assert decoded == RowChange.update(T, old, new)
    assert (decoded.kind, decoded.table, decoded.values, decoded.old_values) == (
        RowKind.UPDATE, T, new, old,
    )  # fmt: skip
    assert RowChange.decoded(RowKind.INSERT, T, new) == RowChange.insert(T, new)
    with pytest.raises(AttributeError):  # still frozen
        decoded.values = {}  # type: ignore[misc]
    # No checks: the caller vouches for the columns (a decoder built from the table).
    assert RowChange.decoded(RowKind.INSERT, T, {"nope": 1}).values == {"nope": 1}


def test_txn_is_rows_or_ddl_with_sane_timestamps() -> None:
    assert Txn(5).rows == () and Txn(5).ddl is None  # a checkpoint-only marker
    with pytest.raises(ValueError):
        Txn(5, rows=(RowChange.insert(T, {"id": 1}),), ddl=Ddl("shop", "drop table t"))
    with pytest.raises(ValueError):
        Txn(0)
    with pytest.raises(ValueError):
        Txn(5, start_ts=6)


def test_pending_skips_applied_and_rejects_disorder() -> None:
    batch = [Txn(15), Txn(20), Txn(30), Txn(40)]
    assert [t.commit_ts for t in pending(batch, 20)] == [30, 40]
    assert [t.commit_ts for t in pending(batch, None)] == [15, 20, 30, 40]
    assert pending(batch, 40) == []
    for bad in ([Txn(30), Txn(30)], [Txn(40), Txn(30)]):
        with pytest.raises(SinkError) as e:
            pending(bad, 20)
        assert not e.value.retriable


def test_error_retriable_flag() -> None:
    assert not SinkError("x").retriable
    assert SinkError("x", retriable=True).retriable
    assert isinstance(UnsupportedDdl("y"), SinkError) and not UnsupportedDdl("y").retriable
