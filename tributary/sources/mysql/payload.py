"""MySQL's compressed transaction payload (TRANSACTION_PAYLOAD_EVENT, type 40) -> inner events.

With ``binlog_transaction_compression=ON`` (MySQL >= 8.0.20) a transaction's events (QUERY
``BEGIN``, TABLE_MAPs, rows events, XID) are written as one type-40 event after the GTID. Its
body, after the 19-byte header, is a list of fields, each three packed integers (MySQL's
``net_field_length``: < 251 in one byte, 0xFC + 2 bytes, 0xFD + 3 bytes, 0xFE + 8 bytes):
field type, value length, value; type 0 (no length, no value) ends the list and the
compressed bytes follow. Field types: 1 payload size, 2 compression type (0 zstd, 255 none),
3 uncompressed size. The inner events are whole events with their 19-byte headers and no
CRC32 (the outer event carries the checksum); each one's ``event_size`` frames the next.

Invariant: either every inner event comes out whole, in order, or ``MalformedEvent`` says
what is wrong (unknown compression, sizes that disagree, a truncated inner event); a payload
never yields a partial transaction silently. The uncompressed size is capped by what the
event declares, so a hostile frame cannot make us allocate without bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import zstandard

from tributary.sources.mysql.errors import MalformedEvent

HEADER = 19
END_MARK, PAYLOAD_SIZE, COMPRESSION_TYPE, UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NONE = 0, 255
MAX_UNCOMPRESSED = 1 << 30  # MySQL's max_allowed_packet ceiling; a transaction is never larger


@dataclass(frozen=True, slots=True)
class PayloadHeader:
    payload_size: int
    compression: int
    uncompressed_size: int
    start: int  # offset of the compressed bytes in the event


def _packed(buf: bytes, p: int) -> tuple[int, int]:
    """MySQL's packed integer at ``p``: (value, offset after it)."""
    if p >= len(buf):
        raise MalformedEvent("transaction payload: field list truncated")
    first = buf[p]
    if first < 251:
        return first, p + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if width is None or p + 1 + width > len(buf):
        raise MalformedEvent(f"transaction payload: bad packed integer 0x{first:02x} at {p}")
    return int.from_bytes(buf[p + 1 : p + 1 + width], "little"), p + 1 + width


def parse_header(event: bytes) -> PayloadHeader:
    """The field list of a type-40 event (checksum already removed)."""
    fields: dict[int, int] = {}
    p = HEADER
    while True:
        field, p = _packed(event, p)
        if field == END_MARK:
            break
        length, p = _packed(event, p)
        end = p + length
        if end > len(event):
            raise MalformedEvent(f"transaction payload: field {field} runs past the event")
        value, q = _packed(event, p)
        if q != end:
            raise MalformedEvent(f"transaction payload: field {field} length {length} mismatch")
        fields[field] = value  # unknown field types are skipped by their length, as MySQL does
        p = end
    size = fields.get(PAYLOAD_SIZE, len(event) - p)
    if size != len(event) - p:
        raise MalformedEvent(
            f"transaction payload: declares {size} bytes, carries {len(event) - p}"
        )
    return PayloadHeader(
        size, fields.get(COMPRESSION_TYPE, NONE), fields.get(UNCOMPRESSED_SIZE, -1), p
    )


def decompress(event: bytes) -> bytes:
    """The inner events of a type-40 event, concatenated."""
    head = parse_header(event)
    body = event[head.start :]
    if head.compression == NONE:
        raw = body
    elif head.compression == ZSTD:
        limit = head.uncompressed_size if head.uncompressed_size >= 0 else MAX_UNCOMPRESSED
        if limit > MAX_UNCOMPRESSED:
            raise MalformedEvent(f"transaction payload: uncompressed size {limit} too large")
        try:
            raw = _unzstd(body, limit)
        except zstandard.ZstdError as e:
            raise MalformedEvent(f"transaction payload: zstd: {e}") from e
    else:
        raise MalformedEvent(
            f"transaction payload: compression type {head.compression} is not supported "
            "(only zstd=0 and none=255 exist)"
        )
    if head.uncompressed_size >= 0 and len(raw) != head.uncompressed_size:
        raise MalformedEvent(
            f"transaction payload: {len(raw)} bytes uncompressed, "
            f"header says {head.uncompressed_size}"
        )
    return raw


def _unzstd(body: bytes, limit: int) -> bytes:
    """zstd frames -> bytes, reading at most ``limit + 1`` (never more than declared)."""
    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(body, read_across_frames=True) as reader:
        while len(out) <= limit:
            chunk = reader.read(min(1 << 20, limit + 1 - len(out)))
            if not chunk:
                break
            out += chunk
    return bytes(out)


def split_events(raw: bytes) -> list[bytes]:
    """Inner events, framed by each header's ``event_size``."""
    out: list[bytes] = []
    p = 0
    while p < len(raw):
        if p + HEADER > len(raw):
            raise MalformedEvent(f"transaction payload: truncated inner event header at {p}")
        size = int.from_bytes(raw[p + 9 : p + 13], "little")
        if size < HEADER or p + size > len(raw):
            raise MalformedEvent(f"transaction payload: inner event at {p} has size {size}")
        out.append(raw[p : p + size])
        p += size
    return out


def inner_events(event: bytes) -> list[bytes]:
    """Decompress a type-40 event (checksum removed) and split it into its events."""
    return split_events(decompress(event))
