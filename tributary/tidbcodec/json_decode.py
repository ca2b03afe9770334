"""Decoding TiDB binary JSON (the layout is described in :mod:`tidbcodec.json_binary`).

Invariant: corrupt input (bad type code, offsets past the end, offsets that
loop) raises :class:`DecodeError`, never IndexError or RecursionError; bytes
that are not UTF-8 are kept (surrogateescape) rather than rejected.
"""

from __future__ import annotations

import struct

from tributary.tidbcodec.errors import DecodeError
from tributary.tidbcodec.json_types import (
    ARRAY,
    DATE,
    DATETIME,
    DURATION,
    F64,
    FLOAT64,
    HEADER,
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
from tributary.tidbcodec.number import decode_uvarint
from tributary.tidbcodec.timecodec import CoreTime, nanos_to_timedelta


def peek_size(buf: bytes, pos: int) -> int:
    """Length of the (type code + value) JSON at ``pos`` (TiDB's PeekBytesAsJSON)."""
    if pos >= len(buf):
        raise DecodeError("cannot peek JSON from empty bytes")
    tc = buf[pos]
    if tc in (OBJECT, ARRAY):
        if len(buf) - pos < 1 + HEADER:
            raise DecodeError("truncated JSON container")
        return 1 + int(U32.unpack_from(buf, pos + 5)[0])
    if tc == STRING:
        n, end = decode_uvarint(buf, pos + 1)
        return end - pos + n
    if tc in (INT64, UINT64, FLOAT64, DATE, DATETIME, TIMESTAMP):
        return 9
    if tc == LITERAL:
        return 2
    if tc == OPAQUE:
        n, end = decode_uvarint(buf, pos + 2)
        return end - pos + n
    if tc == DURATION:
        return 13
    raise DecodeError(f"invalid JSON type code {tc:#x}")


def decode(type_code: int, data: bytes) -> JsonValue:
    """Decode a value produced by :func:`encode` or by TiDB."""
    try:
        return _decode(type_code, data, 0, 0)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise DecodeError(f"corrupt binary JSON: {e}") from e


def _decode(tc: int, buf: bytes, off: int, depth: int) -> JsonValue:
    if depth > MAX_DEPTH:
        raise DecodeError("JSON document is too deep")
    if tc == OBJECT:
        return _decode_object(buf, off, depth)
    if tc == ARRAY:
        count = U32.unpack_from(buf, off)[0]
        return [
            _decode_entry(buf, off, off + HEADER + i * VALUE_ENTRY, depth) for i in range(count)
        ]
    if tc == LITERAL:
        return _decode_literal(buf[off])
    if tc == INT64:
        i64: int = I64.unpack_from(buf, off)[0]
        return i64
    if tc == UINT64:
        u64: int = U64.unpack_from(buf, off)[0]
        return u64
    if tc == FLOAT64:
        f64: float = F64.unpack_from(buf, off)[0]
        return f64
    if tc == STRING:
        n, start = decode_uvarint(buf, off)
        return _slice(buf, start, n).decode("utf-8", "surrogateescape")
    return _decode_extra(tc, buf, off)


def _decode_extra(tc: int, buf: bytes, off: int) -> JsonValue:
    if tc == OPAQUE:
        n, start = decode_uvarint(buf, off + 1)
        return JsonOpaque(buf[off], _slice(buf, start, n))
    if tc in (DATE, DATETIME, TIMESTAMP):
        core = CoreTime.from_core_bits(U64.unpack_from(buf, off)[0])
        value = core.to_date() if tc == DATE else core.to_datetime()
        if value is None:
            raise DecodeError(f"JSON time {core} is not a valid date")
        return value
    if tc == DURATION:
        return nanos_to_timedelta(I64.unpack_from(buf, off)[0])
    raise DecodeError(f"invalid JSON type code {tc:#x}")


def _slice(buf: bytes, start: int, n: int) -> bytes:
    if len(buf) - start < n:
        raise DecodeError("truncated JSON string")
    return bytes(buf[start : start + n])


def _decode_literal(code: int) -> JsonValue:
    if code == LITERAL_NULL:
        return None
    if code == LITERAL_TRUE:
        return True
    if code == LITERAL_FALSE:
        return False
    raise DecodeError(f"invalid JSON literal {code:#x}")


def _decode_entry(buf: bytes, doc_off: int, entry_off: int, depth: int) -> JsonValue:
    tc = buf[entry_off]
    if tc == LITERAL:
        return _decode_literal(buf[entry_off + 1])
    rel: int = U32.unpack_from(buf, entry_off + 1)[0]
    return _decode(tc, buf, doc_off + rel, depth + 1)


def _decode_object(buf: bytes, off: int, depth: int) -> dict[str, JsonValue]:
    count: int = U32.unpack_from(buf, off)[0]
    values_at = off + HEADER + count * KEY_ENTRY
    out: dict[str, JsonValue] = {}
    for i in range(count):
        entry = off + HEADER + i * KEY_ENTRY
        key_off: int = U32.unpack_from(buf, entry)[0]
        key_len: int = U16.unpack_from(buf, entry + 4)[0]
        key = _slice(buf, off + key_off, key_len).decode("utf-8", "surrogateescape")
        out[key] = _decode_entry(buf, off, values_at + i * VALUE_ENTRY, depth)
    return out
