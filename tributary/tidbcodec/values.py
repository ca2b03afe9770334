"""Python-side value types shared by :mod:`convert` and :mod:`unflatten`."""

from __future__ import annotations

import decimal
import struct
from typing import Final, TypeAlias

from tributary.tidbcodec.errors import EncodeError
from tributary.tidbcodec.json_binary import JsonValue
from tributary.tidbcodec.timecodec import CoreTime


class JsonNull:
    """A JSON ``null`` document (distinct from SQL NULL, which is ``None``)."""

    def __repr__(self) -> str:
        return "JSON_NULL"


JSON_NULL: Final = JsonNull()

SqlValue: TypeAlias = JsonValue | decimal.Decimal | bytes | CoreTime | frozenset[str] | JsonNull
"""Every Python value :func:`tidbcodec.unflatten.from_datum` can return."""

_F32 = struct.Struct("<f")


def to_float32(f: float) -> float:
    """Round to the nearest float32, as TiDB does for FLOAT columns."""
    try:
        result: float = _F32.unpack(_F32.pack(f))[0]
    except OverflowError as e:
        raise EncodeError(f"{f} does not fit FLOAT") from e
    return result
