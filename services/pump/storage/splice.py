"""Splice a P-binlog's data into its C-binlog, at the byte level: the binlog a puller receives.

tidb-binlog (``PullCommitBinlog``) decodes both, copies ``prewrite_value``,
``ddl_query``, ``ddl_job_id`` and ``ddl_schema_state`` from the P-binlog into
the C-binlog and re-marshals it. A full betterproto decode costs ~80 us per
1 KB binlog, so this module does the same at the wire level: it keeps every
field of the C-binlog except those four and appends the P-binlog's encodings
of them. Parsed by any protobuf decoder the result equals the re-marshalled
one (for a repeated occurrence of a field, the last one wins).

Invariant: the output is a well-formed ``binlog.Binlog`` whose fields 5-8 come
only from the P-binlog and every other field only from the C-binlog.
"""

from __future__ import annotations

from collections.abc import Iterator

from tributary.varint import read_varint
from tributary.wire.peek import MalformedBinlog

COPIED_FIELDS = frozenset({5, 6, 7, 8})  # prewrite_value, ddl_query, ddl_job_id, ddl_schema_state


def _varint_end(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    return read_varint(buf, pos, end, MalformedBinlog)


def fields(buf: bytes) -> Iterator[tuple[int, int, int]]:
    """``(field_number, start, end)`` of each encoded field, ``buf[start:end]`` being all of it."""
    pos, end = 0, len(buf)
    while pos < end:
        start = pos
        key, pos = _varint_end(buf, pos, end)
        wire_type = key & 7
        if wire_type == 0:
            _, pos = _varint_end(buf, pos, end)
        elif wire_type == 2:
            length, pos = _varint_end(buf, pos, end)
            pos += length
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        else:
            raise MalformedBinlog(f"unsupported wire type {wire_type}")
        if pos > end:
            raise MalformedBinlog("field runs past the end")
        yield key >> 3, start, pos


def attach_prewrite(commit: bytes, prewrite: bytes) -> bytes:
    """The commit binlog carrying the prewrite's value and DDL fields."""
    parts = [commit[s:e] for f, s, e in fields(commit) if f not in COPIED_FIELDS]
    parts.extend(prewrite[s:e] for f, s, e in fields(prewrite) if f in COPIED_FIELDS)
    return b"".join(parts)
