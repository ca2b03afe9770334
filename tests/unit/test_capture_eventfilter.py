"""Event filters' pure parts: the value expressions, the DDL event types, refusals."""

from __future__ import annotations

from decimal import Decimal

import pytest

from services.capture.errors import BadRequest
from services.capture.eventfilter import EventFilter, ddl_types
from services.capture.sqlexpr import compile_expr
from tributary.cdc.replica import EventFilterRule

ROW = {"id": 7, "price": Decimal("1500.00"), "state": "new", "note": None}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("price > 1000", True),
        ("price > 1000 and state = 'paid'", False),
        ("price > 1000 or state = 'paid'", True),
        ("state in ('new', 'paid')", True),
        ("id not in (1, 2)", True),
        ("id between 5 and 9", True),
        ("state like 'n%'", True),
        ("note is null", True),
        ("note is not null", False),
        ("note = 'x'", None),  # unknown: the row is kept
        ("note = 'x' or id = 7", True),
        ("not (id = 7)", False),
        ("price * 2 >= 3000 and -id < 0", True),
        ("`PRICE` = '1500'", True),  # case-insensitive column, string compared as a number
    ],
)
def test_expressions_follow_mysql(text: str, value: object) -> None:
    assert compile_expr(text)(ROW) is value


@pytest.mark.parametrize("text", ["", "upper(state) = 'NEW'", "id >", "id = 1 garbage", "(id = 1"])
def test_expressions_outside_the_grammar_are_refused(text: str) -> None:
    with pytest.raises(BadRequest):
        compile_expr(text)


@pytest.mark.parametrize(
    ("query", "types"),
    [
        ("CREATE DATABASE shop", {"create database"}),
        ("create table t (id int primary key)", {"create table"}),
        ("DROP TABLE IF EXISTS t", {"drop table"}),
        ("TRUNCATE TABLE t", {"truncate table"}),
        ("RENAME TABLE a TO b", {"rename table"}),
        ("ALTER TABLE t ADD COLUMN c INT", {"alter table", "add column"}),
        (
            "alter table shop.t add index i (a, b), drop column c",
            {"alter table", "add index", "drop column", "multi schema change"},
        ),
        ("ALTER TABLE t MODIFY c BIGINT", {"alter table", "modify column"}),
        ("CREATE UNIQUE INDEX i ON t (a)", {"create index"}),
        ("GRANT ALL ON *.* TO x", set()),
    ],
)
def test_ddl_event_types_are_read_from_the_query(query: str, types: set[str]) -> None:
    assert ddl_types(query) == types


def test_bad_rules_are_refused_with_the_reason() -> None:
    with pytest.raises(BadRequest, match="TiDB-only"):
        EventFilter([EventFilterRule(("a.*",), ("rebase auto id",))])
    with pytest.raises(BadRequest, match="unknown event types"):
        EventFilter([EventFilterRule(("a.*",), ("upsert",))])
    with pytest.raises(BadRequest, match="ignore-sql: bad regular expression"):
        EventFilter([EventFilterRule(("a.*",), (), ("(",))])
    with pytest.raises(BadRequest, match=r"event-filters\[0\]\.ignore-delete-value-expr"):
        EventFilter([EventFilterRule(("a.*",), ignore_delete_value_expr="id >")])
