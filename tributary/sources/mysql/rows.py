"""WRITE/UPDATE/DELETE_ROWS events (v1 and v2) -> ``change.RowChange`` values.

Layout after the header: table id (6 bytes), flags (2), in v2 an extra-data block (its 2-byte
length counts itself), the column count, one "columns present" bitmap (two for UPDATE:
before and after image), then rows to the end of the event. Each row image is a null bitmap
over the present columns followed by the present non-NULL values in column order.

Worked example, ``t(id int, name varchar(20))`` with FULL row image, ``INSERT (7, 'ab')``:
``... 02 | 03 | 00 | 07 00 00 00 | 02 61 62``: 2 columns, both present (0b11), no NULLs, id
= 7 (4 bytes little-endian), name = 2 bytes "ab". With ``binlog_row_image=MINIMAL`` a
before image holds only some columns; the row dict then holds only those.

This is the hot path: the common case (every column present, no NULL) runs a tight loop
over the table's compiled decoders, and the row changes are built without
``RowChange.__post_init__``'s checks (a quarter of the reader's time): the row dicts are made
here from the table's own column names, so what those checks verify holds by construction.
"""

from __future__ import annotations

from tributary.change import Row, RowChange, RowKind, SqlValue, TableInfo
from tributary.sources.mysql import events as ev
from tributary.sources.mysql.errors import MalformedEvent
from tributary.sources.mysql.numeric import Decoder
from tributary.sources.mysql.schema import CompiledTable
from tributary.sources.mysql.tablemap import lenenc

_KIND = {
    ev.WRITE_ROWS_V1: RowKind.INSERT,
    ev.WRITE_ROWS_V2: RowKind.INSERT,
    ev.UPDATE_ROWS_V1: RowKind.UPDATE,
    ev.UPDATE_ROWS_V2: RowKind.UPDATE,
    ev.DELETE_ROWS_V1: RowKind.DELETE,
    ev.DELETE_ROWS_V2: RowKind.DELETE,
}
_V2 = frozenset({ev.WRITE_ROWS_V2, ev.UPDATE_ROWS_V2, ev.DELETE_ROWS_V2})


_new = object.__new__
_set = object.__setattr__


def _change(kind: RowKind, info: TableInfo, values: Row, old: Row | None = None) -> RowChange:
    change: RowChange = _new(RowChange)
    _set(change, "kind", kind)
    _set(change, "table", info)
    _set(change, "values", values)
    _set(change, "old_values", old)
    return change


def rows_table_id(event: bytes) -> int:
    return int.from_bytes(event[19:25], "little")


def _image_decoder(
    table: CompiledTable, present: int, ncols: int
) -> tuple[tuple[tuple[str, Decoder], ...], int]:
    cols = tuple((table.names[i], table.decoders[i]) for i in range(ncols) if present >> i & 1)
    return cols, (len(cols) + 7) // 8


def _read_image(
    buf: bytes, pos: int, cols: tuple[tuple[str, Decoder], ...], null_len: int
) -> tuple[dict[str, SqlValue], int]:
    nulls = int.from_bytes(buf[pos : pos + null_len], "little")
    pos += null_len
    row: dict[str, SqlValue] = {}
    if not nulls:
        for name, decode in cols:
            row[name], pos = decode(buf, pos)
        return row, pos
    bit = 1
    for name, decode in cols:
        if nulls & bit:
            row[name] = None
        else:
            row[name], pos = decode(buf, pos)
        bit <<= 1
    return row, pos


def decode_rows(event: bytes, tp: int, table: CompiledTable) -> list[RowChange]:
    """The row changes of one rows event (checksum removed), decoded with ``table``."""
    try:
        return _decode(event, tp, table)
    except (IndexError, ValueError, UnicodeDecodeError) as e:
        raise MalformedEvent(
            f"rows event for {table.info.qualified} does not decode with its TABLE_MAP: {e!r}"
        ) from e


def _decode(event: bytes, tp: int, table: CompiledTable) -> list[RowChange]:
    kind = _KIND[tp]
    p = 19 + 8  # table id (6), flags (2)
    if tp in _V2:  # then the extra data, its 2-byte length counting itself
        p += int.from_bytes(event[p : p + 2], "little")
    ncols, p = lenenc(event, p)
    if ncols != len(table.names):
        raise MalformedEvent(
            f"rows event for {table.info.qualified} has {ncols} columns, "
            f"its TABLE_MAP {len(table.names)}"
        )
    blen = (ncols + 7) // 8
    present = int.from_bytes(event[p : p + blen], "little")
    p += blen
    cols, null_len = _image_decoder(table, present, ncols)
    info = table.info
    end = len(event)
    out: list[RowChange] = []
    append = out.append
    if kind is RowKind.UPDATE:
        after = int.from_bytes(event[p : p + blen], "little")
        p += blen
        cols2, null_len2 = _image_decoder(table, after, ncols)
        while p < end:
            old, p = _read_image(event, p, cols, null_len)
            new, p = _read_image(event, p, cols2, null_len2)
            append(_change(kind, info, new, old))
        return out
    while p < end:
        row, p = _read_image(event, p, cols, null_len)
        append(_change(kind, info, row))
    if p != end:
        raise MalformedEvent(f"rows event for {info.qualified} overran its end")
    return out
