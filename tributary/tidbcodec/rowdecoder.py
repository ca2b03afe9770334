"""Compiled decoding of binlog rows straight into ``{column name: value}`` (the hot path).

:mod:`tidbcodec.row` decodes a row into ``{column id: Datum}`` and a reader then converts each
datum by its column's type: a Datum object, an isinstance chain and a type dispatch per value.
A :class:`RowDecoder` is built once per table version from its :class:`Field` list (each field
already knows how to turn its column's values into what the reader wants) and walks a row's
bytes once: column ids and the common value encodings (varint, uvarint, compact bytes, NULL)
are read inline and handed to the field's converter for that encoding (``ints`` or ``text``);
every other encoding, and every encoding a field has no converter for, becomes a Datum
through ``decode_one`` and goes to the field's generic ``datum`` converter. A row as TiDB
writes it (known columns with one-byte ids, in table order, inline encodings) is read on a
shorter path still (``_scan_in_order``: no per-column order, repeat or unknown-id
bookkeeping); any other row goes through the full scan.

Invariant: for any input, the result equals ``decode_*_row`` followed by ``datum`` on each
known column, in the fields' order (given that ``ints`` and ``text`` agree with ``datum``, as
:class:`Field` requires), and input those decoders reject raises
:class:`DecodeError` here too: corrupt bytes, a repeated column, old and new rows of an update
with different columns, the new row format. NULL is ``None`` for every column. Column ids
without a field (a column being added, the hidden ``_tidb_rowid``) are read and left out.

Worked example, fields ``1 id`` (ints: identity) and ``2 c`` (text: utf-8)::

    08 02 | 08 c8 01 | 08 04 | 02 06 61 62 63
    col 1 | varint 100 (zigzag 200, two bytes) | col 2 | compact bytes, length 3, "abc"
    -> {"id": 100, "c": "abc"}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from tributary.tidbcodec.datum import (
    COMPACT_BYTES_FLAG,
    NIL_FLAG,
    UVARINT_FLAG,
    VARINT_FLAG,
    BytesDatum,
    Datum,
    IntDatum,
    NullDatum,
    UintDatum,
    decode_one,
)
from tributary.tidbcodec.errors import DecodeError
from tributary.tidbcodec.row import is_empty_row, reject_new_format
from tributary.varint import read_varint

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Field(Generic[V]):
    """One column: its id and name, and how its values are converted.

    ``ints`` takes the value of an int or uint datum and ``text`` the bytes of a bytes datum;
    each must return what ``datum`` returns for that datum. ``None`` sends such values through
    ``datum`` (which then also raises for a datum the column cannot hold).
    """

    id: int
    name: str
    datum: Callable[[Datum], V]
    ints: Callable[[int], V] | None = None
    text: Callable[[bytes], V] | None = None


Values = dict[str, V | None]


class _Column(Generic[V]):
    """A field compiled: a converter for every datum kind the scan reads inline."""

    __slots__ = ("name", "on_bytes", "on_datum", "on_int", "on_uint", "position")

    def __init__(self, position: int, f: Field[V]) -> None:
        datum = f.datum
        self.position = position
        self.name = f.name
        self.on_int: Callable[[int], V] = f.ints or (lambda n: datum(IntDatum(n)))
        self.on_uint: Callable[[int], V] = f.ints or (lambda n: datum(UintDatum(n)))
        self.on_bytes: Callable[[bytes], V] = f.text or (lambda b: datum(BytesDatum(b)))
        self.on_datum = datum

    def convert(self, d: Datum) -> V | None:
        """A datum read by ``decode_one`` (comparable int/uint, bytes, float, decimal, ...)."""
        if isinstance(d, NullDatum):
            return None
        if isinstance(d, IntDatum):
            return self.on_int(d.value)
        if isinstance(d, UintDatum):
            return self.on_uint(d.value)
        if isinstance(d, BytesDatum):
            return self.on_bytes(d.value)
        return self.on_datum(d)


class RowDecoder(Generic[V]):
    """Decodes the inserted, updated and deleted rows of one table version."""

    def __init__(self, fields: Sequence[Field[V]], handle: Sequence[Field[V] | None] = ()) -> None:
        self._columns = {f.id: _Column(i, f) for i, f in enumerate(fields)}
        # the column of each one-byte column id varint (zigzag: id 1 is 2, id 63 is 126)
        self._by_byte: list[_Column[V] | None] = [None] * 256
        for col_id, c in self._columns.items():
            if 0 < col_id < 64:
                self._by_byte[col_id << 1] = c
        self._names = tuple(f.name for f in fields)
        # what each handle datum of an inserted row fills
        self._handle = tuple(None if f is None else self._columns.get(f.id) for f in handle)

    def inserted(self, data: bytes) -> Values[V]:
        """Handle datum(s), then the row; a handle column missing from the row is filled."""
        if len(self._handle) == 1 and data and data[0] == VARINT_FLAG:  # an int handle
            u, pos = read_varint(data, 1, len(data), DecodeError)
            row, ordered = self._row(data, pos)
            c = self._handle[0]
            if c is not None and c.name not in row:
                row[c.name] = c.on_int(~(u >> 1) if u & 1 else u >> 1)
                ordered = False
            return row if ordered else self._ordered(row)
        pos = 0
        filled: list[tuple[_Column[V], Datum]] = []
        for c in self._handle:
            d, pos = decode_one(data, pos)
            if c is not None:
                filled.append((c, d))
        row, ordered = self._row(data, pos)
        for c, d in filled:
            if c.name not in row:
                row[c.name] = c.convert(d)
                ordered = False
        return row if ordered else self._ordered(row)

    def deleted(self, data: bytes) -> Values[V]:
        row, ordered = self._row(data, 0)
        return row if ordered else self._ordered(row)

    def updated(self, data: bytes) -> tuple[Values[V], Values[V]]:
        """(old values, new values): the first occurrence of a column is old, the second new."""
        old: Values[V] = {}
        new: Values[V] = {}
        if not data or data[0] == NIL_FLAG:
            if data.strip(bytes((NIL_FLAG,))):
                raise DecodeError("updated row is corrupt: empty old row before values")
            return old, new
        reject_new_format(data, 0)
        ordered, unknown = self._scan(data, 0, old, new)
        if old.keys() != new.keys() or (unknown is not None and unknown[0] != unknown[1]):
            raise DecodeError("updated row is corrupt: old and new rows have different columns")
        if not ordered:
            return self._ordered(old), self._ordered(new)
        return old, new

    def _row(self, data: bytes, pos: int) -> tuple[Values[V], bool]:
        if is_empty_row(data, pos):
            return {}, True
        row = self._scan_in_order(data, pos)
        if row is not None:
            return row, True
        row = {}
        ordered, _ = self._scan(data, pos, row, None)
        return row, ordered

    def _scan_in_order(self, data: bytes, pos: int) -> Values[V] | None:
        """The common row, read on a short path: every column id a one-byte varint datum of a
        known column, each after the one before in table order (so none repeats), values
        varint, uvarint, NULL or compact bytes. None as soon as the row is anything else:
        ``_scan`` then reads it from the start (and finds what is wrong, if anything)."""
        columns = self._by_byte
        end = len(data)
        last = -1
        row: Values[V] = {}
        while pos < end:
            if data[pos] != VARINT_FLAG or end - pos < 3:
                return None
            c = columns[data[pos + 1]]
            if c is None or c.position <= last:
                return None
            last = c.position
            flag = data[pos + 2]
            pos += 3
            if flag == NIL_FLAG:
                row[c.name] = None
                continue
            if pos >= end or not (
                flag == COMPACT_BYTES_FLAG or flag == VARINT_FLAG or flag == UVARINT_FLAG
            ):
                return None
            u = data[pos]
            if u < 0x80:
                pos += 1
            elif pos + 1 < end and data[pos + 1] < 0x80:
                u = (u & 0x7F) | data[pos + 1] << 7
                pos += 2
            else:
                u, pos = read_varint(data, pos, end, DecodeError)
            if flag == COMPACT_BYTES_FLAG:
                size = ~(u >> 1) if u & 1 else u >> 1
                stop = pos + size
                if size < 0 or stop > end:
                    return None
                row[c.name] = c.on_bytes(data[pos:stop])
                pos = stop
            elif flag == VARINT_FLAG:
                row[c.name] = c.on_int(~(u >> 1) if u & 1 else u >> 1)
            else:
                row[c.name] = c.on_uint(u)
        return row

    def _ordered(self, row: Values[V]) -> Values[V]:
        return {n: row[n] for n in self._names if n in row}

    def _scan(
        self, data: bytes, pos: int, first: Values[V], second: Values[V] | None
    ) -> tuple[bool, tuple[set[int], set[int]] | None]:
        """Read ``colID, value`` pairs from ``pos`` to the end into ``first`` (or, for an
        update, ``second`` once a column is in ``first``). Returns whether each dict got its
        columns in table order, and the ids without a field seen in each (None: there were
        none)."""
        columns = self._columns
        end = len(data)
        last_first = last_second = -1
        ordered = True
        unknown: tuple[set[int], set[int]] | None = None
        while pos < end:
            # Column id: a varint datum, nearly always of one byte (zigzag: 2n or -2n-1).
            if data[pos] == VARINT_FLAG:
                pos += 1
                u = data[pos] if pos < end else 0x80
                if u < 0x80:
                    pos += 1
                else:
                    u, pos = read_varint(data, pos, end, DecodeError)
                col_id = ~(u >> 1) if u & 1 else u >> 1
            else:
                col_id, pos = _column_id(data, pos)
            if pos >= end:
                raise DecodeError("row is corrupt: column ID without a value")
            c = columns.get(col_id)
            flag = data[pos]
            value: V | None
            if flag == VARINT_FLAG or flag == COMPACT_BYTES_FLAG or flag == UVARINT_FLAG:
                pos += 1
                u = data[pos] if pos < end else 0x80
                if u < 0x80:
                    pos += 1
                else:
                    u, pos = read_varint(data, pos, end, DecodeError)
                if flag == UVARINT_FLAG:
                    value = None if c is None else c.on_uint(u)
                elif flag == VARINT_FLAG:
                    value = None if c is None else c.on_int(~(u >> 1) if u & 1 else u >> 1)
                else:
                    size = ~(u >> 1) if u & 1 else u >> 1
                    if size < 0 or end - pos < size:
                        raise DecodeError(
                            f"insufficient bytes to decode value, expected length {size}"
                        )
                    value = None if c is None else c.on_bytes(data[pos : pos + size])
                    pos += size
            elif flag == NIL_FLAG:
                pos += 1
                value = None
            else:
                d, pos = decode_one(data, pos)
                value = None if c is None else c.convert(d)
            if c is None:
                if unknown is None:
                    unknown = (set(), set())
                _place_unknown(col_id, unknown, second is not None)
                continue
            name = c.name
            if name not in first:
                first[name] = value
                if c.position < last_first:
                    ordered = False
                last_first = c.position
            elif second is not None and name not in second:
                second[name] = value
                if c.position < last_second:
                    ordered = False
                last_second = c.position
            else:
                raise _repeated(col_id, second is not None)
        return ordered, unknown


def _column_id(data: bytes, pos: int) -> tuple[int, int]:
    col, pos = decode_one(data, pos)
    if isinstance(col, IntDatum) or (isinstance(col, UintDatum) and col.value < 1 << 63):
        return col.value, pos
    raise DecodeError(f"row is corrupt: column ID is {col!r}")


def _repeated(col_id: int, update: bool) -> DecodeError:
    if update:
        return DecodeError(f"updated row is corrupt: column {col_id} appears 3 times")
    return DecodeError(f"row is corrupt: column {col_id} appears twice")


def _place_unknown(col_id: int, unknown: tuple[set[int], set[int]], update: bool) -> None:
    if col_id not in unknown[0]:
        unknown[0].add(col_id)
    elif update and col_id not in unknown[1]:
        unknown[1].add(col_id)
    else:
        raise _repeated(col_id, update)
