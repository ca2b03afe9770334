"""TiDB's binary JSON (``types/json_binary.go``), encode and decode.

A document is a type code byte plus a value. Objects and arrays are::

    count:u32 size:u32 key-entry* value-entry* key* value*     (little endian)
    key-entry   = key-offset:u32 key-length:u16
    value-entry = type:u8 offset-or-inlined-literal:u32

Offsets are relative to the start of the object/array; only literals
(null/true/false) are inlined; object keys are sorted by their UTF-8 bytes.
Example: ``{"a": true}`` encodes (type 0x01) as
``01000000 14000000 | 13000000 0100 | 04 01000000 | 61``.

Python model: dict / list / str / bool / None (JSON null) / int (int64, or
uint64 above int64's range) / float, plus :class:`JsonOpaque`,
``datetime.date``/``datetime`` (JSON date/datetime/timestamp) and
``timedelta`` (JSON time). Invariant: ``decode(*encode(v)) == v`` for every
value of that model; TiDB distinguishes uint64 from int64 only above int64's
range, and so does this module.
"""

from __future__ import annotations

import datetime as dt
import math

from tributary.tidbcodec.errors import EncodeError
from tributary.tidbcodec.json_decode import decode, peek_size
from tributary.tidbcodec.json_types import (
    ARRAY,
    DATE,
    DATETIME,
    DURATION,
    F64,
    FLOAT64,
    I64,
    INT64,
    KEY_ENTRY,
    LITERAL,
    LITERAL_FALSE,
    LITERAL_NULL,
    LITERAL_TRUE,
    MAX_DEPTH,
    OBJECT,
    OPAQUE,
    STRING,
    TIMESTAMP,
    U16,
    U32,
    U64,
    UINT64,
    VALUE_ENTRY,
    JsonOpaque,
    JsonValue,
)
from tributary.tidbcodec.number import INT64_MAX, INT64_MIN, UINT64_MAX, encode_uvarint
from tributary.tidbcodec.timecodec import CoreTime, timedelta_to_nanos


def encode(value: JsonValue) -> tuple[int, bytes]:
    """Encode a Python JSON value; returns (type code, value bytes)."""
    buf = bytearray()
    type_code = _append(buf, value, 0)
    return type_code, bytes(buf)


def _append(buf: bytearray, value: JsonValue, depth: int) -> int:
    if depth > MAX_DEPTH:
        raise EncodeError("JSON document is too deep")
    if value is None:
        buf.append(LITERAL_NULL)
        return LITERAL
    if isinstance(value, bool):
        buf.append(LITERAL_TRUE if value else LITERAL_FALSE)
        return LITERAL
    if isinstance(value, int):
        if INT64_MIN <= value <= INT64_MAX:
            buf += I64.pack(value)
            return INT64
        if 0 <= value <= UINT64_MAX:
            buf += U64.pack(value)
            return UINT64
        raise EncodeError(f"JSON integer {value} does not fit 64 bits")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EncodeError(f"JSON cannot hold {value}")
        buf += F64.pack(value)
        return FLOAT64
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogateescape")
        buf += encode_uvarint(len(data)) + data
        return STRING
    if isinstance(value, list):
        _append_array(buf, value, depth)
        return ARRAY
    if isinstance(value, dict):
        _append_object(buf, value, depth)
        return OBJECT
    return _append_scalar_extra(buf, value)


def _append_scalar_extra(buf: bytearray, value: JsonValue) -> int:
    if isinstance(value, JsonOpaque):
        buf.append(value.type_code)
        buf += encode_uvarint(len(value.data)) + value.data
        return OPAQUE
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            raise EncodeError("JSON datetime must be naive")
        buf += U64.pack(CoreTime.from_python(value).to_core_bits())
        return DATETIME
    if isinstance(value, dt.date):
        buf += U64.pack(CoreTime.from_python(value).to_core_bits())
        return DATE
    if isinstance(value, dt.timedelta):
        buf += I64.pack(timedelta_to_nanos(value)) + U32.pack(6)
        return DURATION
    raise EncodeError(f"cannot encode {type(value).__name__} as JSON")


def _append_elem(buf: bytearray, doc_off: int, entry_off: int, value: JsonValue, d: int) -> None:
    elem_off = len(buf)
    type_code = _append(buf, value, d + 1)
    if type_code == LITERAL:
        literal = buf[elem_off]
        del buf[elem_off:]
        buf[entry_off] = LITERAL
        buf[entry_off + 1] = literal
        return
    buf[entry_off] = type_code
    U32.pack_into(buf, entry_off + 1, elem_off - doc_off)


def _append_array(buf: bytearray, items: list[JsonValue], depth: int) -> None:
    doc_off = len(buf)
    buf += U32.pack(len(items)) + bytes(4)
    entries = len(buf)
    buf += bytes(len(items) * VALUE_ENTRY)
    for i, item in enumerate(items):
        _append_elem(buf, doc_off, entries + i * VALUE_ENTRY, item, depth)
    U32.pack_into(buf, doc_off + 4, len(buf) - doc_off)


def _append_object(buf: bytearray, obj: dict[str, JsonValue], depth: int) -> None:
    fields = sorted((k.encode("utf-8", "surrogateescape"), v) for k, v in obj.items())
    doc_off = len(buf)
    buf += U32.pack(len(fields)) + bytes(4)
    key_entries = len(buf)
    buf += bytes(len(fields) * KEY_ENTRY)
    val_entries = len(buf)
    buf += bytes(len(fields) * VALUE_ENTRY)
    for i, (key, _) in enumerate(fields):
        if len(key) > 0xFFFF:
            raise EncodeError("JSON object key is longer than 65535 bytes")
        U32.pack_into(buf, key_entries + i * KEY_ENTRY, len(buf) - doc_off)
        U16.pack_into(buf, key_entries + i * KEY_ENTRY + 4, len(key))
        buf += key
    for i, (_, value) in enumerate(fields):
        _append_elem(buf, doc_off, val_entries + i * VALUE_ENTRY, value, depth)
    U32.pack_into(buf, doc_off + 4, len(buf) - doc_off)


__all__ = [
    "ARRAY",
    "DATE",
    "DATETIME",
    "DURATION",
    "FLOAT64",
    "INT64",
    "LITERAL",
    "LITERAL_FALSE",
    "LITERAL_NULL",
    "LITERAL_TRUE",
    "MAX_DEPTH",
    "OBJECT",
    "OPAQUE",
    "STRING",
    "TIMESTAMP",
    "UINT64",
    "JsonOpaque",
    "JsonValue",
    "decode",
    "encode",
    "peek_size",
]
