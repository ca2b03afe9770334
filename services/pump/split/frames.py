"""The framing between a pump's front processes and its storage writer (a local socket).

A front sends whole batches of binlogs it has already validated; the writer answers each
batch once every binlog in it is durable (or refused). Every frame is::

    length u32 | kind u8 | batch u64 | body          (little-endian; length counts what follows)

- ``WRITE`` (front -> writer), body ``count u32`` then per binlog
  ``tp u8 | start_ts i64 | commit_ts i64 | ddl_job_id i64 | size u32 | payload``: the header
  the front peeked travels with the payload, so the writer does not parse it again;
- ``ACK`` (writer -> front), body ``count u32``: 0 when every binlog of the batch is stored,
  else one ``reason u8 | retriable u8 | size u16 | message`` per binlog, reason 0 = stored;
- ``HELLO`` (front -> writer, batch = the front's pid, no body): the front serves its port;
- ``OBSERVED`` (front -> writer, batch = the front's pid), body ``count u32`` then per
  histogram child ``method`` and ``label`` (each ``size u8 | utf-8``) ``| sum f64 | n u16 |
  n x count u64``: what the front's RPC histograms observed since its last ``OBSERVED``
  (per-bucket counts, not cumulative, the last one +Inf), for the writer's ``/metrics``.

Worked example: a batch 7 of one prewrite (start ts 5, 3-byte payload ``abc``) is
``length 45 | 01 | 7 | count 1 | 01 5 0 0 3 abc`` and its ack ``length 13 | 02 | 7 | count 0``.
Invariant: ``decode_items(encode_write(b, items))`` gives back ``items``, and an ack carries
one result per binlog of its batch, in the batch's order.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from services.pump.intake import Reason, WriteRefused
from services.pump.metrics import Observed
from services.pump.storage import WriteItem
from tributary.errors import TributaryError
from tributary.wire.peek import TYPES, BinlogHeader

WRITE, ACK, HELLO, OBSERVED = 1, 2, 3, 4

PREFIX = struct.Struct("<IBQ")  # length, kind, batch
_COUNT = struct.Struct("<I")
_ITEM = struct.Struct("<BqqqI")
_RESULT = struct.Struct("<BBH")
_SUM_N = struct.Struct("<dH")
MAX_FRAME = 1 << 31  # no front sends more than max-message-size per binlog

REASONS = (None, *Reason)  # code 0: stored; 1..: the refusal's reason
_CODE = {r: i for i, r in enumerate(REASONS) if r is not None}


class BadFrame(TributaryError):
    """The peer sent bytes that are not a frame of this protocol."""


def frame(kind: int, batch: int, body: bytes = b"") -> bytes:
    return PREFIX.pack(len(body) + 9, kind, batch) + body


def encode_write(batch: int, items: Sequence[WriteItem]) -> bytes:
    parts = [_COUNT.pack(len(items))]
    pack = _ITEM.pack
    for it in items:
        h = it.header
        parts.append(pack(h.tp, h.start_ts, h.commit_ts, h.ddl_job_id, len(it.payload)))
        parts.append(it.payload)
    return frame(WRITE, batch, b"".join(parts))


def decode_items(body: bytes) -> list[WriteItem]:
    """The binlogs of a ``WRITE`` body; BadFrame if it does not add up."""
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        pos, items = _COUNT.size, []
        unpack, size = _ITEM.unpack_from, _ITEM.size
        for _ in range(count):
            tp, start_ts, commit_ts, ddl_job_id, n = unpack(body, pos)
            pos += size
            if pos + n > len(body):
                raise BadFrame("a payload runs past the end of its frame")
            header = BinlogHeader(TYPES[tp], start_ts, commit_ts, ddl_job_id)
            items.append(WriteItem(body[pos : pos + n], header))
            pos += n
    except (struct.error, KeyError) as e:
        raise BadFrame(f"malformed write frame: {e!r}") from e
    if pos != len(body):
        raise BadFrame("bytes left over after the last binlog of a write frame")
    return items


def encode_ack(batch: int, results: Sequence[WriteRefused | None]) -> bytes:
    if not any(results):
        return frame(ACK, batch, _COUNT.pack(0))
    parts = [_COUNT.pack(len(results))]
    for r in results:
        if r is None:
            parts.append(_RESULT.pack(0, 0, 0))
            continue
        message = str(r).encode()[:0xFFFF]
        parts.append(_RESULT.pack(_CODE[r.reason], bool(r.retriable), len(message)) + message)
    return frame(ACK, batch, b"".join(parts))


def decode_ack(body: bytes, expected: int) -> list[WriteRefused | None]:
    """The results of an ``ACK`` body for a batch of ``expected`` binlogs."""
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        if count == 0:
            return [None] * expected
        if count != expected:
            raise BadFrame(f"an ack of {count} results for a batch of {expected}")
        pos, results = _COUNT.size, list[WriteRefused | None]()
        for _ in range(count):
            code, retriable, n = _RESULT.unpack_from(body, pos)
            pos += _RESULT.size
            reason = REASONS[code]
            if reason is None:
                results.append(None)
            else:
                message = body[pos : pos + n].decode(errors="replace")
                results.append(WriteRefused(reason, message, retriable=bool(retriable)))
            pos += n
    except (struct.error, IndexError) as e:
        raise BadFrame(f"malformed ack frame: {e!r}") from e
    return results


def _short_text(text: str) -> bytes:
    data = text.encode()[:0xFF]
    return bytes((len(data),)) + data


def encode_observed(pid: int, observed: Sequence[Observed]) -> bytes:
    parts = [_COUNT.pack(len(observed))]
    for o in observed:
        parts += [_short_text(o.method), _short_text(o.label), _SUM_N.pack(o.total, len(o.counts))]
        parts.append(struct.pack(f"<{len(o.counts)}Q", *o.counts))
    return frame(OBSERVED, pid, b"".join(parts))


def decode_observed(body: bytes) -> list[Observed]:
    """The histogram children of an ``OBSERVED`` body; BadFrame if it does not add up."""
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        pos, out = _COUNT.size, list[Observed]()
        for _ in range(count):
            names = []
            for _ in range(2):
                n = body[pos]
                names.append(body[pos + 1 : pos + 1 + n].decode())
                pos += 1 + n
            total, n = _SUM_N.unpack_from(body, pos)
            pos += _SUM_N.size
            counts = struct.unpack_from(f"<{n}Q", body, pos)
            pos += 8 * n
            out.append(Observed(names[0], names[1], counts, total))
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise BadFrame(f"malformed observed frame: {e!r}") from e
    if pos != len(body):
        raise BadFrame("bytes left over after the last histogram of an observed frame")
    return out
