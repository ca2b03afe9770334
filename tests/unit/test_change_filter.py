"""Table filters: allow-list then block-list, case-insensitive names, ``~regex`` patterns."""

from __future__ import annotations

import pytest

from tributary.change import (
    DEFAULT_IGNORE_DBS,
    Ddl,
    FilterError,
    RowChange,
    TableFilter,
    TableInfo,
    Txn,
    parse_table,
)

ORDERS = TableInfo.build("shop", "orders", [("id", "bigint")], ["id"])
TMP = TableInfo.build("shop", "tmp_1", [("id", "bigint")], ["id"])
USERS = TableInfo.build("crm", "Users", [("id", "bigint")], ["id"])


def test_no_rules_pass_everything() -> None:
    f = TableFilter()
    assert f.passes_everything
    assert f.allows("mysql", "user")
    txn = Txn(10, 5, (RowChange.insert(ORDERS, {"id": 1}),))
    assert f.filter(txn) is txn


def test_default_ignored_schemas_are_case_insensitive() -> None:
    f = TableFilter(ignore_dbs=DEFAULT_IGNORE_DBS)
    assert not f.allows("information_schema", "tables")
    assert not f.allows("MySQL", "user")
    assert not f.allows("mysql")
    assert f.allows("shop", "orders")


def test_allow_list_by_db_or_table() -> None:
    f = TableFilter(do_dbs=["crm"], do_tables=[("shop", "orders")])
    assert f.allows("CRM", "anything")
    assert f.allows("shop", "ORDERS")
    assert not f.allows("shop", "tmp_1")
    assert not f.allows("other", "orders")


def test_database_ddl_passes_when_a_do_table_names_its_schema() -> None:
    f = TableFilter(do_tables=[("shop", "orders")])
    assert f.allows("shop")
    assert not f.allows("other")


def test_block_list_applies_after_the_allow_list() -> None:
    f = TableFilter(do_dbs=["shop"], ignore_tables=[("shop", "~^tmp_")])
    assert f.allows("shop", "orders")
    assert not f.allows("shop", "TMP_2")
    assert f.allows("shop", "x_tmp_")  # anchored regex


def test_regex_is_unanchored_unless_it_anchors_itself() -> None:
    f = TableFilter(ignore_dbs=["~test"])
    assert not f.allows("my_TEST_db", "t")
    assert f.allows("prod", "t")


def test_filter_keeps_allowed_rows_in_order_and_marks_empty_txns() -> None:
    f = TableFilter(ignore_tables=[("shop", "~^tmp_")])
    rows = (
        RowChange.insert(ORDERS, {"id": 1}),
        RowChange.insert(TMP, {"id": 2}),
        RowChange.insert(ORDERS, {"id": 3}),
    )
    kept = f.filter(Txn(10, 5, rows, schema_version=7))
    assert kept.rows == (rows[0], rows[2])
    assert (kept.commit_ts, kept.start_ts, kept.schema_version) == (10, 5, 7)
    marker = f.filter(Txn(11, 6, (rows[1],), schema_version=7))
    assert marker == Txn(11, 6, schema_version=7)


def test_filtered_ddl_becomes_a_marker() -> None:
    f = TableFilter(ignore_dbs=["crm"])
    ddl = Txn(20, 19, ddl=Ddl("crm", "CREATE TABLE Users (id bigint)", "Users"))
    assert f.filter(ddl) == Txn(20, 19)
    kept = Txn(21, 20, ddl=Ddl("shop", "CREATE TABLE t (id int)", "t"))
    assert f.filter(kept) is kept
    assert f.filter(Txn(22, 22)) == Txn(22, 22)
    assert f.allows(USERS.schema.upper(), "x") is False


def test_parse_table_and_bad_patterns() -> None:
    assert parse_table("shop.~^tmp_.x") == ("shop", "~^tmp_.x")
    with pytest.raises(FilterError):
        parse_table("orders")
    with pytest.raises(FilterError):
        TableFilter(ignore_dbs=["~("])
