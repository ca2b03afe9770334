"""TiDB's old row format and the three row layouts inside a binlog.

Old row (``tablecodec.EncodeOldRow``): ``colID, value, colID, value, ...``
encoded with :func:`encode_value`, column IDs as int datums; a row with no
columns is the single byte ``00`` (NilFlag). Example: column 1 = 100 and
column 2 = "abc" encode as ``08 02 08 c8 01 | 08 04 02 06 61 62 63``.

Binlog rows (``TableMutation``, reference §1.1):

* inserted row = handle datum(s) (``encode_value``; one int for an int handle,
  one per column for a clustered/common handle) followed by the old row;
* updated row  = old row of the OLD values followed by old row of the NEW
  values; the first occurrence of a column ID is the old value, the second
  the new one (drainer's ``DecodeOldAndNewRow``);
* deleted row  = old row of the full old row (tables without an int primary
  key also carry the hidden ``_tidb_rowid`` as column ``EXTRA_HANDLE_ID``).

Invariant: decoders reject corrupt input (odd datum count, non-int column ID,
a column repeated where it may not be) instead of returning a partial row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tributary.tidbcodec.datum import NIL_FLAG, Datum, IntDatum, UintDatum, decode_one, encode_value
from tributary.tidbcodec.errors import DecodeError

EXTRA_HANDLE_ID = -1  # model.ExtraHandleID: the hidden _tidb_rowid column
_NEW_ROW_FORMAT = 128  # rowcodec.CodecVer: first byte of the new (v2) row format


def encode_old_row(cols: Iterable[tuple[int, Datum]]) -> bytes:
    parts: list[Datum] = []
    for col_id, value in cols:
        parts.append(IntDatum(col_id))
        parts.append(value)
    if not parts:
        return bytes((NIL_FLAG,))
    return encode_value(*parts)


def _iter_pairs(data: bytes, pos: int) -> Iterable[tuple[int, Datum]]:
    end = len(data)
    while pos < end:
        col, pos = decode_one(data, pos)
        if pos >= end:
            raise DecodeError("row is corrupt: column ID without a value")
        value, pos = decode_one(data, pos)
        if isinstance(col, IntDatum):
            yield col.value, value
        elif isinstance(col, UintDatum) and col.value < 1 << 63:
            yield col.value, value
        else:
            raise DecodeError(f"row is corrupt: column ID is {col!r}")


def reject_new_format(data: bytes, pos: int) -> None:
    if pos < len(data) and data[pos] == _NEW_ROW_FORMAT:
        raise DecodeError("row uses the new row format (rowcodec v2), not the old one")


def is_empty_row(data: bytes, pos: int) -> bool:
    """True when the row at ``pos`` is empty (nothing, or a lone NilFlag)."""
    reject_new_format(data, pos)
    return pos >= len(data) or (data[pos] == NIL_FLAG and pos + 1 == len(data))


def decode_old_row(data: bytes, pos: int = 0) -> dict[int, Datum]:
    """Decode an old-format row from ``pos`` to the end of ``data``."""
    row: dict[int, Datum] = {}
    if is_empty_row(data, pos):
        return row
    for col_id, value in _iter_pairs(data, pos):
        if col_id in row:
            raise DecodeError(f"row is corrupt: column {col_id} appears twice")
        row[col_id] = value
    return row


def encode_inserted_row(handle: Sequence[Datum], cols: Iterable[tuple[int, Datum]]) -> bytes:
    return encode_value(*handle) + encode_old_row(cols)


def decode_inserted_row(data: bytes, handle_cols: int = 1) -> tuple[list[Datum], dict[int, Datum]]:
    """Split an inserted row into its handle datum(s) and its column values."""
    handle: list[Datum] = []
    pos = 0
    for _ in range(handle_cols):
        d, pos = decode_one(data, pos)
        handle.append(d)
    return handle, decode_old_row(data, pos)


def encode_updated_row(old: Iterable[tuple[int, Datum]], new: Iterable[tuple[int, Datum]]) -> bytes:
    return encode_old_row(old) + encode_old_row(new)


def decode_updated_row(data: bytes) -> tuple[dict[int, Datum], dict[int, Datum]]:
    """(old values, new values): the first occurrence of a column is old, the second new."""
    old: dict[int, Datum] = {}
    new: dict[int, Datum] = {}
    if not data or data[0] == NIL_FLAG:
        if data.strip(bytes((NIL_FLAG,))):
            raise DecodeError("updated row is corrupt: empty old row before values")
        return old, new
    reject_new_format(data, 0)
    for col_id, value in _iter_pairs(data, 0):
        if col_id not in old:
            old[col_id] = value
        elif col_id not in new:
            new[col_id] = value
        else:
            raise DecodeError(f"updated row is corrupt: column {col_id} appears 3 times")
    if old.keys() != new.keys():
        raise DecodeError("updated row is corrupt: old and new rows have different columns")
    return old, new


def encode_deleted_row(cols: Iterable[tuple[int, Datum]]) -> bytes:
    return encode_old_row(cols)


def decode_deleted_row(data: bytes) -> dict[int, Datum]:
    return decode_old_row(data)
