"""MySQL type strings -> TiDB field types for the pump sink's table registrations, and the
table infos built from them (column ids kept across layouts)."""

from __future__ import annotations

import pytest

from tributary.change import TableInfo
from tributary.ddlhistory import mysql_type
from tributary.sinks.pump.types import UnsupportedType, column_type, comparison_key, tidb_table
from tributary.tidbcodec import mysqltypes as mt


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("int(11)", "int"),
        ("INT UNSIGNED", "int unsigned"),
        ("bigint(20) unsigned zerofill", "bigint unsigned"),
        ("tinyint(1)", "tinyint"),
        ("boolean", "tinyint"),
        ("double precision", "double"),
        ("float(7,3)", "float"),
        ("float(30)", "double"),
        ("decimal(10,2)", "decimal(10,2)"),
        ("numeric", "decimal(10,0)"),
        ("datetime(3)", "datetime(3)"),
        ("timestamp", "timestamp"),
        ("time(2)", "time(2)"),
        ("date", "date"),
        ("year(4)", "year"),
        ("bit(8)", "bit(8)"),
        ("varchar(20)", "varchar(20)"),
        ("varchar(20) character set latin1 collate latin1_bin", "varchar(20)"),
        ("char(3) binary", "binary(3)"),
        ("varbinary(8)", "varbinary(8)"),
        ("binary(4)", "binary(4)"),
        ("text", "text"),
        ("mediumblob", "mediumblob"),
        ("longtext CHARSET utf8mb4", "longtext"),
        ("json", "json"),
        ("enum('a','b''c')", "enum('a','b''c')"),
        ("set('x','y')", "set('x','y')"),
    ],
)
def test_types_render_back_as_tidb_does(text: str, rendered: str) -> None:
    assert mysql_type(column_type(text)) == rendered


def test_field_type_details() -> None:
    assert column_type("bigint unsigned").flag & mt.UNSIGNED_FLAG
    assert column_type("varchar(8) character set gbk").text_encoding == "gbk"
    assert column_type("blob").is_binary_string and not column_type("text").is_binary_string
    assert column_type("enum('a','b')").elems == ("a", "b")
    assert column_type("datetime(6)").fsp == 6 and column_type("decimal(5,3)").decimal == 3


@pytest.mark.parametrize("text", ["geometry", "point", "int(", "varchar(10) frobnicate"])
def test_unsupported_types_are_named(text: str) -> None:
    with pytest.raises(UnsupportedType, match="column type") as e:
        column_type(text)
    assert not e.value.retriable


def test_layout_changes_keep_column_ids_by_name() -> None:
    before = TableInfo.build("s", "t", [("id", "bigint"), ("a", "int"), ("b", "text")], ["id"])
    after = TableInfo.build("s", "t", [("id", "bigint"), ("B", "text"), ("c", "int")], ["id"])
    old = tidb_table(40, before, None)
    assert [c.id for c in old.columns] == [1, 2, 3] and old.pk_is_handle
    new = tidb_table(40, after, old)
    assert [(c.name, c.id, c.offset) for c in new.columns] == [
        ("id", 1, 0),
        ("B", 3, 1),
        ("c", 4, 2),
    ]
    keyless = tidb_table(
        41, TableInfo.build("s", "k", [("v", "varchar(5)")], [], {"u": ["v"]}), None
    )
    assert not keyless.pk_is_handle and list(keyless.unique_keys) == ["u"]


def test_comparison_ignores_spelling_but_not_layout() -> None:
    a = TableInfo.build("s", "t", [("id", "int(11)"), ("v", "VARCHAR(5)")], ["id"])
    b = TableInfo.build("S", "T", [("ID", "int"), ("v", "varchar(5)")], ["ID"])
    c = TableInfo.build("s", "t", [("id", "int"), ("v", "varchar(6)")], ["id"])
    d = TableInfo.build("s", "t", [("id", "int"), ("v", "varchar(5)")], [], {"u": ["id"]})
    assert comparison_key(a) == comparison_key(b)
    assert comparison_key(a) != comparison_key(c) and comparison_key(a) != comparison_key(d)
