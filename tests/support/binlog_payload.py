"""MySQL's TRANSACTION_PAYLOAD_EVENT (type 40) built from inner events, as MySQL writes it with
``binlog_transaction_compression=ON``: header, then the field list (packed integers: type,
length, value; 1 payload size, 2 compression type, 3 uncompressed size; 0 ends the list), then
the zstd-compressed inner events (whole events, no CRC32), then the outer CRC32. Also the
events of a binlog file as the server wrote it."""

from __future__ import annotations

import struct
import zlib

import zstandard

HEADER = 19


def packed(n: int) -> bytes:
    """MySQL's packed (``net_field_length``) integer."""
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def field(tp: int, value: int) -> bytes:
    v = packed(value)
    return packed(tp) + packed(len(v)) + v


def without_crc(event: bytes) -> bytes:
    """An event with its trailing CRC32 cut (the size in its header fixed to match)."""
    body = bytearray(event[:-4])
    body[9:13] = len(body).to_bytes(4, "little")
    return bytes(body)


def payload_event(
    inner: list[bytes],
    *,
    ts: int = 100,
    server_id: int = 1,
    log_pos: int = 0,
    compression: int = 0,
    checksum: bool = True,
) -> bytes:
    """A type-40 event carrying ``inner`` (events without CRC32), zstd (0) or none (255)."""
    raw = b"".join(inner)
    data = zstandard.ZstdCompressor().compress(raw) if compression == 0 else raw
    fields = field(1, len(data)) + field(2, compression) + field(3, len(raw)) + packed(0)
    size = HEADER + len(fields) + len(data) + (4 if checksum else 0)
    head = struct.pack("<IBIIIH", ts, 40, server_id, size, log_pos, 0)
    event = head + fields + data
    return event + zlib.crc32(event).to_bytes(4, "little") if checksum else event


def file_events(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, event) of every event in a binlog file's bytes (after its 4-byte magic)."""
    assert data[:4] == b"\xfebin", "not a binlog file"
    out = []
    p = 4
    while p + HEADER <= len(data):
        size = int.from_bytes(data[p + 9 : p + 13], "little")
        if size < HEADER or p + size > len(data):
            break
        out.append((p, data[p : p + size]))
        p += size
    return out
