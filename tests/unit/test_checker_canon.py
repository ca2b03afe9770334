"""The checker's canonical value form: a MariaDB driver value and the SQLite sink's stored form
of the same data must meet; different data must not."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tributary.checker.canon import canon, canon_row, encode, row_hash
from tributary.checker.coltypes import ColumnType, Kind, mysql_type, sqlite_type
from tributary.checker.sqlite_source import _dec_order, _time_order, _u64_order


def f32(x: float) -> float:
    result: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return result


@pytest.mark.parametrize(
    ("column_type", "expected"),
    [
        ("int(11)", ColumnType(Kind.INT, bits=32)),
        ("bigint(20) unsigned", ColumnType(Kind.INT, unsigned=True, bits=64)),
        ("tinyint(1)", ColumnType(Kind.INT, bits=8)),
        ("year(4)", ColumnType(Kind.INT, bits=16)),
        ("bit(10)", ColumnType(Kind.BIT, bits=10)),
        ("decimal(10,2)", ColumnType(Kind.DECIMAL, scale=2, precision=10)),
        ("decimal(20,0) unsigned", ColumnType(Kind.DECIMAL, 0, 20, unsigned=True)),
        ("float", ColumnType(Kind.FLOAT32)),
        ("double", ColumnType(Kind.FLOAT64)),
        ("datetime(3)", ColumnType(Kind.DATETIME, 3)),
        ("timestamp", ColumnType(Kind.DATETIME, 0)),
        ("time(2)", ColumnType(Kind.TIME, 2)),
        ("date", ColumnType(Kind.DATE)),
        ("varchar(20)", ColumnType(Kind.TEXT)),
        ("enum('a','b')", ColumnType(Kind.TEXT)),
        ("set('a','it''s','c')", ColumnType(Kind.SET, members=("a", "it's", "c"))),
        ("binary(4)", ColumnType(Kind.BYTES)),
        ("longblob", ColumnType(Kind.BYTES)),
        ("json", ColumnType(Kind.JSON)),
        ("geometry", ColumnType(Kind.RAW)),
    ],
)
def test_mysql_types(column_type: str, expected: ColumnType) -> None:
    assert mysql_type(column_type) == expected


def test_mariadb_json_is_longtext_with_a_check() -> None:
    assert mysql_type("longtext").kind is Kind.TEXT
    assert mysql_type("longtext", is_json=True).kind is Kind.JSON
    assert not sqlite_type("TEXT").native


T = mysql_type


@pytest.mark.parametrize(
    ("column_type", "driver_value", "sqlite_value", "expected"),
    [
        ("bigint unsigned", 18446744073709551615, "18446744073709551615", 18446744073709551615),
        ("int", -5, -5, -5),
        ("bit(10)", b"\x00\x05", 5, 5),
        ("decimal(10,2)", Decimal("1.50"), "1.50", "1.50"),
        ("decimal(10,2)", Decimal("-0.00"), "0.00", "0.00"),
        ("decimal(30,0)", Decimal("12345678901234567890123"), "12345678901234567890123",
         "12345678901234567890123"),
        ("float", 1.23457, f32(1.2345678), "1.23457"),  # MariaDB prints FLOAT with 6 digits
        ("float", 16777200.0, f32(16777217.0), "1.67772e+07"),
        ("float", -0.0, 0.0, "0"),
        ("double", 0.1, 0.1, "0.1"),
        ("date", dt.date(2024, 2, 29), "2024-02-29", "2024-02-29"),
        ("date", "0000-00-00", "0000-00-00", "0000-00-00"),
        ("datetime(3)", dt.datetime(2024, 2, 29, 10, 0, 0, 500000), "2024-02-29 10:00:00.500",
         "2024-02-29 10:00:00.500"),
        ("datetime", dt.datetime(2024, 2, 29, 10, 0, 0), "2024-02-29 10:00:00",
         "2024-02-29 10:00:00"),
        ("datetime(3)", "0000-00-00 00:00:00.000", "0000-00-00 00:00:00.000",
         "0000-00-00 00:00:00.000"),
        ("timestamp(6)", dt.datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02 03:04:05.000006",
         "2024-01-02 03:04:05.000006"),
        ("time(2)", dt.timedelta(days=-1, seconds=82676, microseconds=550000), "-01:02:03.45",
         "-01:02:03.45"),
        ("time", dt.timedelta(days=34, seconds=82799), "838:59:59", "838:59:59"),
        ("set('a','b','c')", "a,c", "a,c", "a,c"),
        ("set('a','b','c')", {"c", "a"}, "a,c", "a,c"),
        ("binary(4)", b"ab\x00\x00", b"ab\x00\x00", b"ab\x00\x00"),
        ("json", '{"b": [1, 2.5], "a": null}', '{"a":null,"b":[1,2.5]}', '{"a":null,"b":[1,2.5]}'),
        ("varchar(10)", "héllo", "héllo", "héllo"),
    ],
)  # fmt: skip
def test_driver_and_sqlite_forms_meet(
    column_type: str, driver_value: object, sqlite_value: object, expected: object
) -> None:
    t = T(column_type)
    assert canon(t, driver_value) == expected
    assert canon(t, sqlite_value) == expected


def test_different_data_stays_different() -> None:
    assert canon(T("decimal(10,2)"), "1.50") != canon(T("decimal(10,2)"), "1.51")
    assert canon(T("double"), 0.1) != canon(T("double"), 0.1 + 1e-16)
    assert canon(T("datetime(6)"), "2024-01-01 00:00:00.000001") != canon(
        T("datetime(6)"), "2024-01-01 00:00:00.000000"
    )
    assert canon(T("float"), 1.5) != canon(T("float"), 1.50001)


def test_null_is_not_empty_or_zero() -> None:
    row_null = canon_row([T("varchar(5)"), T("int")], [None, None])
    row_empty = canon_row([T("varchar(5)"), T("int")], ["", 0])
    assert row_null == (None, None) and row_empty == ("", 0)
    assert encode(row_null) != encode(row_empty)
    assert row_hash(row_null) != row_hash(row_empty)


def test_encoding_is_unambiguous() -> None:
    # Neither a separator inside a value nor a type change can make two rows encode alike.
    assert encode(("a,b", "c")) != encode(("a", "b,c"))
    assert encode((1, "2")) != encode(("1", 2))
    assert encode((b"x",)) != encode(("x",))


def test_unexpected_values_are_compared_as_stored() -> None:
    assert canon(T("int"), "abc") == "abc"
    assert canon(T("json"), "{not json") == "{not json"
    assert canon(T("decimal(5,2)"), "NaN") == "NaN"


@given(st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-(10**20),
                   max_value=10**20),
       st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-(10**20),
                   max_value=10**20))  # fmt: skip
def test_sqlite_decimal_order_is_numeric(a: Decimal, b: Decimal) -> None:
    ka, kb = _dec_order(format(a, "f"), 2), _dec_order(format(b, "f"), 2)
    assert ka is not None and kb is not None
    assert (ka < kb) == (a < b) and (ka == kb) == (a == b)


@given(st.integers(-838 * 3600 * 10**6, 838 * 3600 * 10**6),
       st.integers(-838 * 3600 * 10**6, 838 * 3600 * 10**6))  # fmt: skip
def test_sqlite_time_order_is_chronological(a: int, b: int) -> None:
    t6 = ColumnType(Kind.TIME, 6)
    ta = canon(t6, dt.timedelta(microseconds=a))
    tb = canon(t6, dt.timedelta(microseconds=b))
    ka, kb = _time_order(ta), _time_order(tb)
    assert isinstance(ka, int) and isinstance(kb, int)
    assert (ka < kb) == (a < b)


def test_sqlite_unsigned_order_spans_int64() -> None:
    values = [0, 7, 2**63 - 1, 2**63, 10**19, 2**64 - 1]
    stored: list[int | str] = [v if v < 2**63 else str(v) for v in values]  # as the sink stores
    keys = [_u64_order(v) for v in stored]
    assert keys == sorted(keys, key=lambda k: str(k))
    assert len(set(keys)) == len(keys)
