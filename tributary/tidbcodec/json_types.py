"""Binary JSON constants and the Python model of a JSON value (shared by encoder and decoder)."""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from typing import TypeAlias

OBJECT, ARRAY, LITERAL = 0x01, 0x03, 0x04
INT64, UINT64, FLOAT64, STRING = 0x09, 0x0A, 0x0B, 0x0C
OPAQUE, DATE, DATETIME, TIMESTAMP, DURATION = 0x0D, 0x0E, 0x0F, 0x10, 0x11
LITERAL_NULL, LITERAL_TRUE, LITERAL_FALSE = 0x00, 0x01, 0x02

HEADER = 8
KEY_ENTRY = 6
VALUE_ENTRY = 5
U16, U32, I64, U64, F64 = (struct.Struct(f) for f in ("<H", "<I", "<q", "<Q", "<d"))
MAX_DEPTH = 100


@dataclass(frozen=True, slots=True)
class JsonOpaque:
    """A MySQL opaque JSON value: the column type it came from and its raw bytes."""

    type_code: int
    data: bytes


JsonValue: TypeAlias = (
    bool
    | int
    | float
    | str
    | list["JsonValue"]
    | dict[str, "JsonValue"]
    | JsonOpaque
    | dt.date
    | dt.timedelta
    | None
)
