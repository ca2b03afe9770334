"""tidb-binlog's secondary binlog (``slave.binlog.Binlog``) read by hand: bytes -> ``Txn``.

The arbiter reads every message of its topic with this, and the drainer's Kafka sink the last
message of its topic, for the commit ts it resumes after (it writes them with
``secondary.encode_txn``). It accepts what the generated betterproto classes (with their Rust
codec, which this project installs) accept and gives the same values; what they refuse it
refuses with ``SecondaryBinlogError``: a truncated varint or field, a length past the end of its
message, a varint over 64 bits, a field key over 32 bits or with field number 0, wire types 3, 4
(groups), 6 and 7, a known field with another wire type than its own, a string field that is not
UTF-8. Unknown fields are skipped. A singular field met twice: the last one counts (each is still
checked), as the codec does. int64 fields are the varint's 64 bits as two's complement, enums
(``type``) int32 (the low 32 bits, signed: an unknown mutation type is an insert, an unknown
binlog type a DML), bools any non-zero varint. ``tests/unit/test_secondary_read.py`` checks all of
this against ``Binlog().parse`` and the betterproto decoder kept in
``tests/support/secondary_reference.py``.

Values as the sinks take them, by the column's type name in its ``ColumnInfo`` (TiDB's
``TypeToStr``): NULL when ``is_null``; integer types ``int64_value or uint64_value``; float and
double ``double_value``; enum and set ``uint64_value`` (the message has no member list); bit the
big-endian ``bytes_value`` as an int; year ``string_value`` as an int when it is digits; binary and
blob types ``bytes_value``; json ``bytes_value`` as text; anything else ``string_value``. A row with
another number of columns than the table's column infos is refused.

Speed: the rows (``TableMutation``, ``Row``, ``Column``) are read by one loop per row, each column
into locals, the value picked by a small kind number per column; varints of one and two bytes
(keys, ids, lengths of rows) are read inline, and one that runs past its message is caught by
the length checks after it (or an IndexError at the end of the payload, reported the same).
Everything in a ``Table`` but its mutations (names, column infos, keys) is its header; the
header's bytes key a cache of what they give (the ``TableInfo``, column names and value kinds),
and a ``TableInfo`` is shared by every header of the same table shape (schema, table, columns,
keys), so a stream of one table's messages reads its header once and hands the sinks one
``TableInfo`` object. Messages, headers, and the parts a message does not use (an earlier
``row`` of a mutation that has two, a DDL's ``dml_data``) go through the plain schema-driven
``_read``/``_check``.
"""

from __future__ import annotations

import struct
from typing import Union

from tributary.change import Ddl, RowChange, RowKind, SqlValue, TableInfo, Txn
from tributary.sinks.port import SinkError
from tributary.varint import read_varint


class SecondaryBinlogError(SinkError):
    """A transaction that cannot be written as a secondary binlog, or a message that is not one."""


class _Bad(Exception):
    """A wire or content error inside the reader; ``decode_txn`` reports it."""


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    return read_varint(data, pos, end, _Bad)


# -- the schema, for the plain reader ---------------------------------------------------------
#
# A message's schema maps its field numbers to a kind: a scalar kind below or the schema of the
# nested message. The wire type each kind must have: varint 0, double 1, the rest 2.

_VARINT, _DOUBLE, _BYTES, _STRING = 0, 1, 2, 3
Schema = dict[int, Union[int, "Schema"]]

_COLUMN: Schema = {1: _VARINT, 2: _VARINT, 3: _VARINT, 4: _DOUBLE, 5: _BYTES, 6: _STRING}
_ROW: Schema = {1: _COLUMN}
_MUTATION: Schema = {1: _VARINT, 2: _ROW, 3: _ROW}
_COLUMN_INFO: Schema = {1: _STRING, 2: _STRING, 3: _VARINT, 4: _VARINT, 5: _VARINT}
_KEY: Schema = {1: _STRING, 2: _STRING}
_TABLE: Schema = {1: _STRING, 2: _STRING, 3: _COLUMN_INFO, 4: _MUTATION, 5: _KEY}
_DML: Schema = {1: _TABLE}
_DDL: Schema = {1: _STRING, 2: _STRING, 3: _BYTES}
_BINLOG: Schema = {1: _VARINT, 2: _VARINT, 3: _DML, 4: _DDL, 5: _STRING}

Value = int | float | bytes | str | tuple[int, int]
_F64 = struct.Struct("<d")
_UINT64, _INT64_SIGN = 1 << 64, 1 << 63


def _skip(data: bytes, pos: int, key: int, end: int) -> int:
    """The position after the value of an unknown field whose key was ``key``."""
    wire = key & 7
    if key < 8 or key > 0xFFFFFFFF:
        raise _Bad(f"bad field key {key}")
    if wire == 0:
        _, pos = _varint(data, pos, end)
    elif wire == 2:
        n, pos = _varint(data, pos, end)
        pos += n
    elif wire == 1 or wire == 5:
        pos += 8 if wire == 1 else 4
    else:
        raise _Bad(f"field {key >> 3} has wire type {wire}")
    if pos > end:
        raise _Bad(f"field {key >> 3} runs past the end of its message")
    return pos


def _read(data: bytes, pos: int, end: int, schema: Schema) -> dict[int, list[Value]]:
    """Every known field of the message in ``data[pos:end]``, each value in order of appearance:
    an int for a varint, a float, bytes, a str, or ``(start, stop)`` of a nested message."""
    out: dict[int, list[Value]] = {}
    while pos < end:
        key, pos = _varint(data, pos, end)
        kind = schema.get(key >> 3)
        if kind is None:
            pos = _skip(data, pos, key, end)
            continue
        wire = key & 7
        value: Value
        if kind == _VARINT:
            if wire != 0:
                raise _Bad(f"field {key >> 3} has wire type {wire}, not a varint")
            value, pos = _varint(data, pos, end)
        elif kind == _DOUBLE:
            if wire != 1 or pos + 8 > end:
                raise _Bad(f"field {key >> 3} is not a double")
            value = _F64.unpack_from(data, pos)[0]
            pos += 8
        else:
            if wire != 2:
                raise _Bad(f"field {key >> 3} has wire type {wire}, not length-delimited")
            n, pos = _varint(data, pos, end)
            stop = pos + n
            if stop > end:
                raise _Bad(f"field {key >> 3} runs past the end of its message")
            if kind == _BYTES:
                value = data[pos:stop]
            elif kind == _STRING:
                value = data[pos:stop].decode()
            else:
                value = (pos, stop)
            pos = stop
        out.setdefault(key >> 3, []).append(value)
    return out


def _check(data: bytes, span: tuple[int, int], schema: Schema) -> None:
    """Refuse the nested message at ``span`` as the codec would, keeping nothing from it."""
    fields = _read(data, *span, schema)
    for number in fields:
        sub = schema[number]
        if isinstance(sub, dict):
            for s in _spans(fields, number):
                _check(data, s, sub)


def _last(fields: dict[int, list[Value]], number: int, default: Value) -> Value:
    values = fields.get(number)
    return values[-1] if values else default


def _int(fields: dict[int, list[Value]], number: int) -> int:
    v = _last(fields, number, 0)
    assert isinstance(v, int)
    return v


def _str(fields: dict[int, list[Value]], number: int) -> str:
    v = _last(fields, number, "")
    assert isinstance(v, str)
    return v


def _spans(fields: dict[int, list[Value]], number: int) -> list[tuple[int, int]]:
    spans = fields.get(number, [])
    assert all(isinstance(s, tuple) for s in spans)
    return spans  # type: ignore[return-value]


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


# -- a table's header -------------------------------------------------------------------------

# value kinds: what a column's value is made of (see the module docstring)
_INT, _TEXT, _FLOAT, _NUMBER, _BIT, _YEAR, _BLOB, _JSON = range(8)
_KINDS = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "bigint"), _INT),
    **dict.fromkeys(("float", "double"), _FLOAT),
    **dict.fromkeys(("enum", "set"), _NUMBER),
    "bit": _BIT,
    "year": _YEAR,
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), _BLOB),
    "json": _JSON,
}


class _Header:
    """What a ``Table`` header gives: its ``TableInfo``, and per column its name and value kind."""

    __slots__ = ("info", "kinds", "names")

    def __init__(self, info: TableInfo, names: tuple[str, ...], kinds: tuple[int, ...]) -> None:
        self.info = info
        self.names = names
        self.kinds = kinds


Keys = tuple[tuple[str, tuple[str, ...]], ...]
Shape = tuple[str, str, tuple[tuple[str, str], ...], tuple[str, ...], Keys]
_HEADERS: dict[bytes, _Header] = {}  # header bytes -> what they give
_INFOS: dict[Shape, TableInfo] = {}  # one TableInfo per table shape
_CACHE_MAX = 1024


def _header(head: bytes) -> _Header:
    """The header made of the (whole, consecutive) fields in ``head``, from the cache."""
    got = _HEADERS.get(head)
    if got is not None:
        return got
    h = _read(head, 0, len(head), _TABLE)
    columns: list[tuple[str, str]] = []
    for span in _spans(h, 3):
        c = _read(head, *span, _COLUMN_INFO)
        columns.append((_str(c, 1), _str(c, 2)))
    pk: tuple[str, ...] = ()
    uks: dict[str, tuple[str, ...]] = {}
    for span in _spans(h, 5):
        k = _read(head, *span, _KEY)
        names = tuple(str(n) for n in k.get(2, ()))
        if _str(k, 1) == "PRIMARY":
            pk = names
        else:
            uks[_str(k, 1)] = names
    shape = (_str(h, 1), _str(h, 2), tuple(columns), pk, tuple(uks.items()))
    info = _INFOS.get(shape)
    if info is None:
        try:
            info = TableInfo.build(shape[0], shape[1], columns, pk, uks)
        except ValueError as e:
            raise _Bad(str(e)) from e
        if len(_INFOS) >= _CACHE_MAX:
            _INFOS.clear()
        _INFOS[shape] = info
    got = _Header(info, info.column_names, tuple(_KINDS.get(t, _TEXT) for _, t in columns))
    if len(_HEADERS) >= _CACHE_MAX:
        _HEADERS.clear()
    _HEADERS[head] = got
    return got


# -- the rows ---------------------------------------------------------------------------------


def _row(data: bytes, pos: int, end: int, header: _Header) -> dict[str, SqlValue]:
    """The ``Row`` in ``data[pos:end]`` as column name -> value."""
    names, kinds = header.names, header.kinds
    count = len(names)
    values: dict[str, SqlValue] = {}
    i = 0
    while pos < end:
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(data, pos, end)
        if key != 0x0A:  # not a column
            if key >> 3 == 1:
                raise _Bad(f"Row field 1 has wire type {key & 7}")
            pos = _skip(data, pos, key, end)
            continue
        n = data[pos]
        if n < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            n = n & 0x7F | data[pos + 1] << 7
            pos += 2
        else:
            n, pos = read_varint(data, pos, end, _Bad)
        stop = pos + n
        if stop > end:
            raise _Bad("a column runs past the end of its row")
        null = False
        i64 = u64 = 0
        dbl = 0.0
        raw = b""
        text = ""
        while pos < stop:
            key = data[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = _varint(data, pos, stop)
            if key == 0x10 or key == 0x18 or key == 0x08:
                v = data[pos]
                if v < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    v = v & 0x7F | data[pos + 1] << 7
                    pos += 2
                else:
                    v, pos = read_varint(data, pos, stop, _Bad)
                if key == 0x10:
                    i64 = v - _UINT64 if v >= _INT64_SIGN else v
                elif key == 0x18:
                    u64 = v
                else:
                    null = v != 0
            elif key == 0x32 or key == 0x2A:
                n = data[pos]
                if n < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    n = n & 0x7F | data[pos + 1] << 7
                    pos += 2
                else:
                    n, pos = read_varint(data, pos, stop, _Bad)
                start = pos
                pos += n
                if pos > stop:
                    raise _Bad("a column value runs past the end of its column")
                if key == 0x32:
                    text = data[start:pos].decode()
                else:
                    raw = data[start:pos]
            elif key == 0x21:
                if pos + 8 > stop:
                    raise _Bad("a double runs past the end of its column")
                dbl = _F64.unpack_from(data, pos)[0]
                pos += 8
            elif 1 <= key >> 3 <= 6:
                raise _Bad(f"Column field {key >> 3} has wire type {key & 7}")
            else:
                pos = _skip(data, pos, key, stop)
        if pos > stop:
            raise _Bad("a column runs past its end")
        if i == count:
            raise _Bad(f"a row of {header.info.qualified} has more than its {count} columns")
        kind = kinds[i]
        value: SqlValue
        if null:
            value = None
        elif kind == _INT:
            value = i64 or u64
        elif kind == _TEXT:
            value = text
        elif kind == _BLOB:
            value = raw
        elif kind == _FLOAT:
            value = dbl
        elif kind == _NUMBER:
            value = u64
        elif kind == _BIT:
            value = int.from_bytes(raw, "big")
        elif kind == _YEAR:
            try:
                value = int(text) if text.isdigit() else text
            except ValueError as e:
                raise _Bad(f"year {text!r}: {e}") from e
        else:
            value = raw.decode("utf-8", "surrogateescape")
        values[names[i]] = value
        i += 1
    if i != count:
        raise _Bad(f"a row of {header.info.qualified} has {i} columns, not {count}")
    return values


_EMPTY = (0, 0)


def _mutation(data: bytes, pos: int, end: int, header: _Header) -> RowChange:
    """The ``TableMutation`` in ``data[pos:end]``."""
    kind = 0
    rows: list[tuple[int, int]] = []
    olds: list[tuple[int, int]] = []
    while pos < end:
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(data, pos, end)
        if key == 0x12 or key == 0x1A:
            n = data[pos]
            if n < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                n = n & 0x7F | data[pos + 1] << 7
                pos += 2
            else:
                n, pos = read_varint(data, pos, end, _Bad)
            stop = pos + n
            if stop > end:
                raise _Bad("a row runs past the end of its mutation")
            (rows if key == 0x12 else olds).append((pos, stop))
            pos = stop
        elif key == 0x08:
            kind = data[pos]
            if kind < 0x80:
                pos += 1
            else:
                kind, pos = _varint(data, pos, end)
        elif 1 <= key >> 3 <= 3:
            raise _Bad(f"TableMutation field {key >> 3} has wire type {key & 7}")
        else:
            pos = _skip(data, pos, key, end)
    if pos > end:
        raise _Bad("the mutation type runs past the end of its mutation")
    if kind > 2:
        kind = _int32(kind)
    for span in rows[:-1]:
        _check(data, span, _ROW)
    for span in olds if kind != 1 else olds[:-1]:
        _check(data, span, _ROW)
    values = _row(data, *(rows[-1] if rows else _EMPTY), header)
    info = header.info
    if kind == 1:
        old = _row(data, *(olds[-1] if olds else _EMPTY), header)
        return RowChange.decoded(RowKind.UPDATE, info, values, old)
    return RowChange.decoded(RowKind.DELETE if kind == 2 else RowKind.INSERT, info, values)


def _table(data: bytes, pos: int, end: int, out: list[RowChange]) -> None:
    """The row changes of the ``Table`` in ``data[pos:end]``, appended to ``out``."""
    head: list[bytes] = []  # every field but the mutations, whole
    mutations: list[tuple[int, int]] = []
    while pos < end:
        start = pos
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(data, pos, end)
        if key == 0x22:
            n = data[pos]
            if n < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                n = n & 0x7F | data[pos + 1] << 7
                pos += 2
            else:
                n, pos = read_varint(data, pos, end, _Bad)
            stop = pos + n
            if stop > end:
                raise _Bad("a mutation runs past the end of its table")
            mutations.append((pos, stop))
            pos = stop
        elif key >> 3 == 4:
            raise _Bad(f"Table field 4 has wire type {key & 7}")
        else:
            pos = _skip(data, pos, key, end)
            head.append(data[start:pos])
    header = _header(b"".join(head))
    for span in mutations:
        out.append(_mutation(data, *span, header))


# -- messages ---------------------------------------------------------------------------------


def _decode(data: bytes) -> Txn:
    top = _read(data, 0, len(data), _BINLOG)
    kind, ts = _int32(_int(top, 1)), _int(top, 2)
    ts = ts - _UINT64 if ts >= _INT64_SIGN else ts
    dmls, ddls = _spans(top, 3), _spans(top, 4)
    if kind == 1:  # DDL
        for span in dmls:
            _check(data, span, _DML)
        for span in ddls[:-1]:
            _check(data, span, _DDL)
        d = _read(data, *ddls[-1], _DDL) if ddls else {}
        query = _last(d, 3, b"")
        assert isinstance(query, bytes)
        ddl = Ddl(_str(d, 1), query.decode("utf-8", "surrogateescape"), _str(d, 2))
        return Txn(ts, ddl=ddl)
    for span in ddls:
        _check(data, span, _DDL)
    for span in dmls[:-1]:
        _check(data, span, _DML)
    rows: list[RowChange] = []
    if dmls:
        for span in _spans(_read(data, *dmls[-1], _DML), 1):
            _table(data, *span, rows)
    return Txn(ts, rows=tuple(rows))


def decode_txn(payload: bytes) -> Txn:
    """A secondary binlog message back as a ``Txn`` (values as the sinks take them);
    ``SecondaryBinlogError`` for anything that is not one."""
    data = payload if type(payload) is bytes else bytes(payload)
    try:
        return _decode(data)
    except (_Bad, IndexError, UnicodeDecodeError, ValueError) as e:
        # IndexError: a varint or field cut by the end of the message (read without bounds
        # checks in the row loops); ValueError: a commit ts that is not positive
        raise SecondaryBinlogError(f"not a secondary binlog ({len(data)} bytes): {e}") from e
