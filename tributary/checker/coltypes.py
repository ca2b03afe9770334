"""Column types as the checker sees them: what a value is, so both sides normalize it alike.

A MySQL column type (``information_schema.COLUMNS.COLUMN_TYPE``) names the value's kind
exactly: ``decimal(10,2)`` is DECIMAL with scale 2, ``datetime(3)`` DATETIME with fsp 3,
``set('a','b')`` SET with its members. An SQLite column only has the affinity the SQLite sink
gave it (INTEGER, REAL, TEXT, BLOB), so a MySQL side's type wins when the sides differ (see
``pairing.value_type``): it is what the SQLite sink formatted the values from.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Kind(enum.Enum):
    INT = "int"  # all integer types and YEAR
    BIT = "bit"
    DECIMAL = "decimal"
    FLOAT32 = "float"
    FLOAT64 = "double"
    DATE = "date"
    DATETIME = "datetime"  # DATETIME and TIMESTAMP
    TIME = "time"
    TEXT = "text"  # character strings and ENUM
    SET = "set"
    BYTES = "bytes"  # binary strings and BLOBs
    JSON = "json"
    RAW = "raw"  # unknown: compared as the driver returns it


@dataclass(frozen=True, slots=True)
class ColumnType:
    kind: Kind
    scale: int = 0  # DECIMAL digits after the point; fractional-second digits (fsp) of temporals
    precision: int = 0  # DECIMAL total digits
    unsigned: bool = False
    bits: int = 0  # integer width (8 .. 64), 0 when unknown
    members: tuple[str, ...] = ()  # SET members in definition order
    native: bool = True  # declared as a MySQL type (False: only an SQLite affinity)


_INT_BITS = {
    "tinyint": 8,
    "bool": 8,
    "boolean": 8,
    "smallint": 16,
    "mediumint": 24,
    "int": 32,
    "integer": 32,
    "bigint": 64,
    "year": 16,
}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_TYPE = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(.*)$", re.S)
_QUOTED = re.compile(r"'((?:[^']|'')*)'")


def _numbers(args: str) -> list[int]:
    return [int(a) for a in args.split(",") if a.strip().isdigit()]


def mysql_type(column_type: str, *, is_json: bool = False) -> ColumnType:
    """The type of a MySQL column from its COLUMN_TYPE text, e.g. ``bigint(20) unsigned``.

    ``is_json``: MariaDB declares JSON as ``longtext`` with a ``json_valid`` check.
    """
    m = _TYPE.match(column_type.lower())
    if m is None:
        return ColumnType(Kind.RAW)
    word, args, rest = m.group(1), m.group(2) or "", m.group(3)
    nums = _numbers(args)
    if is_json or word == "json":
        return ColumnType(Kind.JSON)
    if word in _INT_BITS:
        return ColumnType(Kind.INT, unsigned="unsigned" in rest, bits=_INT_BITS[word])
    if word == "bit":
        return ColumnType(Kind.BIT, bits=nums[0] if nums else 1)
    if word in ("decimal", "numeric", "dec", "fixed"):
        precision = nums[0] if nums else 10
        scale = nums[1] if len(nums) > 1 else 0
        return ColumnType(Kind.DECIMAL, scale, precision, unsigned="unsigned" in rest)
    if word == "float":
        return ColumnType(Kind.FLOAT32)
    if word in ("double", "real"):
        return ColumnType(Kind.FLOAT64)
    if word == "date":
        return ColumnType(Kind.DATE)
    if word in ("datetime", "timestamp"):
        return ColumnType(Kind.DATETIME, nums[0] if nums else 0)
    if word == "time":
        return ColumnType(Kind.TIME, nums[0] if nums else 0)
    if word == "set":
        members = tuple(s.replace("''", "'") for s in _QUOTED.findall(args))
        return ColumnType(Kind.SET, members=members)
    if word in _TEXT:
        return ColumnType(Kind.TEXT)
    if word in _BYTES:
        return ColumnType(Kind.BYTES)
    return ColumnType(Kind.RAW)


def sqlite_type(declared: str) -> ColumnType:
    """An SQLite column's type: only an affinity, so its values are compared as stored."""
    del declared  # SQLite keeps whatever was bound; the declared type does not say what it was
    return ColumnType(Kind.RAW, native=False)
