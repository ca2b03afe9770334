"""TABLE_MAP events with their optional metadata (``binlog_row_metadata=FULL``).

A TABLE_MAP precedes the rows events of its table in every transaction and maps a table id
to (schema, table, column types, per-type metadata). With FULL row metadata (MySQL >=
8.0.1, MariaDB >= 10.5) it also carries, as type-length-value fields after the null bitmap:
column names, signedness of numeric columns, character sets of character columns, ENUM and
SET member strings, geometry subtypes and the primary key. That is everything needed to decode
and describe the rows, so the reader never asks the server for today's schema.

Worked example (FULL metadata) for ``t(id bigint unsigned primary key, name varchar(20))`` in
utf8mb4: types ``[8, 15]``; metadata ``80 00`` (varchar max length 80 bytes = 20 chars x 4);
SIGNEDNESS ``0x80`` (first numeric column unsigned); DEFAULT_CHARSET ``[45]``; COLUMN_NAME
``["id", "name"]``; SIMPLE_PRIMARY_KEY ``[0]``.

SIGNEDNESS has one bit per numeric column (most significant first, set = unsigned), and the
servers disagree on which columns are numeric: MySQL counts the integer, FLOAT/DOUBLE and
DECIMAL columns; MariaDB counts YEAR too (an unsigned TINYINT underneath). Counted the wrong
way every bit after the first YEAR shifts: MariaDB writes ``t(y year, i int, ub bigint
unsigned)`` as ``0xa0`` (y, ub unsigned); MySQL's count (i, ub) would read i unsigned and ub
signed, and 2^64 - 1 would decode as -1. So the parser is told which server wrote the event
(``mariadb``, from the FORMAT_DESCRIPTION's server version).
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.sources.mysql.errors import MalformedEvent

# Column types (binlog type codes).
T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE, T_NULL, T_TIMESTAMP = range(8)
T_LONGLONG, T_INT24, T_DATE, T_TIME, T_DATETIME, T_YEAR, T_NEWDATE, T_VARCHAR = range(8, 16)
T_BIT, T_TIMESTAMP2, T_DATETIME2, T_TIME2 = 16, 17, 18, 19
T_JSON, T_NEWDECIMAL, T_ENUM, T_SET = 245, 246, 247, 248
T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB, T_BLOB = 249, 250, 251, 252
T_VAR_STRING, T_STRING, T_GEOMETRY = 253, 254, 255

NUMERIC = frozenset(
    {T_TINY, T_SHORT, T_INT24, T_LONG, T_LONGLONG, T_FLOAT, T_DOUBLE, T_NEWDECIMAL, T_DECIMAL}
)
MARIADB_NUMERIC = NUMERIC | {T_YEAR}  # the columns MariaDB's SIGNEDNESS has a bit for
CHARACTER = frozenset({T_STRING, T_VAR_STRING, T_VARCHAR, T_BLOB})
_META_2 = frozenset({T_VARCHAR, T_VAR_STRING, T_BIT, T_NEWDECIMAL, T_STRING, T_ENUM, T_SET})
_META_1 = frozenset(
    {T_FLOAT, T_DOUBLE, T_BLOB, T_GEOMETRY, T_JSON, T_TIME2, T_DATETIME2, T_TIMESTAMP2}
)

# Optional metadata field types.
SIGNEDNESS, DEFAULT_CHARSET, COLUMN_CHARSET, COLUMN_NAME = 1, 2, 3, 4
SET_STR_VALUE, ENUM_STR_VALUE, GEOMETRY_TYPE, SIMPLE_PRIMARY_KEY = 5, 6, 7, 8
PRIMARY_KEY_WITH_PREFIX, ENUM_AND_SET_DEFAULT_CHARSET, ENUM_AND_SET_COLUMN_CHARSET = 9, 10, 11


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: int  # the real type: STRING's metadata resolved to T_STRING, T_ENUM or T_SET
    meta: int  # type metadata: length, precision << 8 | scale, fsp, ...
    unsigned: bool = False
    collation: int = 0  # character columns: the collation id (63 = binary)
    members: tuple[str, ...] = ()  # ENUM/SET member strings
    geometry: int = 0
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class TableMap:
    table_id: int
    schema: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[int, ...]
    has_names: bool  # FULL metadata was present


def lenenc(buf: bytes, p: int) -> tuple[int, int]:
    """A length-encoded integer at ``p``: (value, position after it)."""
    b = buf[p]
    if b < 0xFB:
        return b, p + 1
    if b == 0xFC:
        return int.from_bytes(buf[p + 1 : p + 3], "little"), p + 3
    if b == 0xFD:
        return int.from_bytes(buf[p + 1 : p + 4], "little"), p + 4
    if b == 0xFE:
        return int.from_bytes(buf[p + 1 : p + 9], "little"), p + 9
    raise MalformedEvent(f"bad length-encoded integer byte {b:#x}")


def _metas(types: bytes, meta: bytes) -> list[tuple[int, int]]:
    """(real type, metadata value) per column."""
    out: list[tuple[int, int]] = []
    p = 0
    for t in types:
        if t in _META_2:
            if t in (T_STRING, T_ENUM, T_SET):
                b0, b1 = meta[p], meta[p + 1]
                if t == T_STRING and b0 in (T_ENUM, T_SET):
                    out.append((b0, b1))  # b1: pack length (bytes of the index/bitmask)
                elif t == T_STRING:
                    # CHAR(n) of >255 bytes hides two length bits in the type byte.
                    length = (((b0 & 0x30) ^ 0x30) << 4) | b1
                    out.append((T_STRING, length))
                else:
                    out.append((t, b1))
            elif t == T_NEWDECIMAL or t == T_BIT:
                out.append((t, meta[p] << 8 | meta[p + 1]))
            else:
                out.append((t, meta[p] | meta[p + 1] << 8))
            p += 2
        elif t in _META_1:
            out.append((t, meta[p]))
            p += 1
        else:
            out.append((t, 0))
    if p != len(meta):
        raise MalformedEvent(f"column metadata has {len(meta)} bytes, the types use {p}")
    return out


def _strings(buf: bytes, p: int, end: int) -> list[str]:
    out = []
    while p < end:
        n, p = lenenc(buf, p)
        out.append(buf[p : p + n].decode("utf-8", "replace"))
        p += n
    return out


def _ints(buf: bytes, p: int, end: int) -> list[int]:
    out = []
    while p < end:
        v, p = lenenc(buf, p)
        out.append(v)
    return out


def _charsets(buf: bytes, p: int, end: int, n: int, default: bool) -> list[int]:
    """DEFAULT_CHARSET: a default then (index, collation) exceptions; COLUMN_CHARSET: one each."""
    values = _ints(buf, p, end)
    if not default:
        return values
    out = [values[0]] * n
    for i in range(1, len(values) - 1, 2):
        out[values[i]] = values[i + 1]
    return out


def _string_lists(buf: bytes, p: int, end: int) -> list[tuple[str, ...]]:
    out = []
    while p < end:
        count, p = lenenc(buf, p)
        members = []
        for _ in range(count):
            n, p = lenenc(buf, p)
            members.append(buf[p : p + n].decode("utf-8", "replace"))
            p += n
        out.append(tuple(members))
    return out


def parse_table_map(event: bytes, post_header_len: int, *, mariadb: bool = False) -> TableMap:
    """Parse a TABLE_MAP event (checksum removed) written by MySQL, or by MariaDB."""
    try:
        return _parse(event, post_header_len, MARIADB_NUMERIC if mariadb else NUMERIC)
    except (IndexError, ValueError) as e:
        raise MalformedEvent(f"bad TABLE_MAP event: {e!r}") from e


def _parse(ev: bytes, post_header_len: int, numeric: frozenset[int]) -> TableMap:
    p = 19
    id_len = 4 if post_header_len == 6 else 6
    table_id = int.from_bytes(ev[p : p + id_len], "little")
    p += post_header_len
    n = ev[p]
    schema = ev[p + 1 : p + 1 + n].decode("utf-8", "replace")
    p += n + 2
    n = ev[p]
    table = ev[p + 1 : p + 1 + n].decode("utf-8", "replace")
    p += n + 2
    ncols, p = lenenc(ev, p)
    types = ev[p : p + ncols]
    p += ncols
    mlen, p = lenenc(ev, p)
    metas = _metas(types, ev[p : p + mlen])
    p += mlen
    nulls = int.from_bytes(ev[p : p + (ncols + 7) // 8], "little")
    p += (ncols + 7) // 8
    fields: dict[int, tuple[int, int]] = {}
    while p < len(ev):
        ftype = ev[p]
        flen, q = lenenc(ev, p + 1)
        fields[ftype] = (q, q + flen)
        p = q + flen
    return _build(ev, table_id, schema, table, metas, nulls, fields, numeric)


def _build(
    ev: bytes,
    table_id: int,
    schema: str,
    table: str,
    metas: list[tuple[int, int]],
    nulls: int,
    fields: dict[int, tuple[int, int]],
    numeric: frozenset[int],
) -> TableMap:
    ncols = len(metas)
    names = _strings(ev, *fields[COLUMN_NAME]) if COLUMN_NAME in fields else []
    if names and len(names) != ncols:
        raise MalformedEvent(f"{schema}.{table}: {len(names)} names for {ncols} columns")
    unsigned = [False] * ncols
    if SIGNEDNESS in fields:
        start, end = fields[SIGNEDNESS]
        bits = int.from_bytes(ev[start:end], "big")
        nbits = (end - start) * 8
        k = 0
        for i, (t, _) in enumerate(metas):
            if t in numeric:
                unsigned[i] = bool(bits >> (nbits - 1 - k) & 1)
                k += 1
    char_idx = [i for i, (t, _) in enumerate(metas) if t in CHARACTER]
    enumset_idx = [i for i, (t, _) in enumerate(metas) if t in (T_ENUM, T_SET)]
    collation = [0] * ncols
    for default_f, column_f, idx in (
        (DEFAULT_CHARSET, COLUMN_CHARSET, char_idx),
        (ENUM_AND_SET_DEFAULT_CHARSET, ENUM_AND_SET_COLUMN_CHARSET, enumset_idx),
    ):
        if default_f in fields:
            cs = _charsets(ev, *fields[default_f], len(idx), True)
        elif column_f in fields:
            cs = _charsets(ev, *fields[column_f], len(idx), False)
        else:
            continue
        for i, c in zip(idx, cs, strict=False):
            collation[i] = c
    members: dict[int, tuple[str, ...]] = {}
    for f, t in ((ENUM_STR_VALUE, T_ENUM), (SET_STR_VALUE, T_SET)):
        if f in fields:
            idx = [i for i, (tt, _) in enumerate(metas) if tt == t]
            members.update(zip(idx, _string_lists(ev, *fields[f]), strict=False))
    geo: dict[int, int] = {}
    if GEOMETRY_TYPE in fields:
        idx = [i for i, (t, _) in enumerate(metas) if t == T_GEOMETRY]
        geo.update(zip(idx, _ints(ev, *fields[GEOMETRY_TYPE]), strict=False))
    pk: tuple[int, ...] = ()
    if SIMPLE_PRIMARY_KEY in fields:
        pk = tuple(_ints(ev, *fields[SIMPLE_PRIMARY_KEY]))
    elif PRIMARY_KEY_WITH_PREFIX in fields:
        pk = tuple(_ints(ev, *fields[PRIMARY_KEY_WITH_PREFIX])[0::2])
    columns = tuple(
        Column(
            name=names[i] if names else f"@{i + 1}",
            type=t,
            meta=m,
            unsigned=unsigned[i],
            collation=collation[i],
            members=members.get(i, ()),
            geometry=geo.get(i, 0),
            nullable=bool(nulls >> i & 1),
        )
        for i, (t, m) in enumerate(metas)
    )
    return TableMap(table_id, schema, table, columns, pk, bool(names))


def table_name(event: bytes, post_header_len: int) -> tuple[int, str, str]:
    """(table id, schema, table) of a TABLE_MAP without parsing the rest."""
    p = 19
    table_id = int.from_bytes(event[p : p + (4 if post_header_len == 6 else 6)], "little")
    p += post_header_len
    n = event[p]
    schema = event[p + 1 : p + 1 + n].decode("utf-8", "replace")
    p += n + 2
    n = event[p]
    return table_id, schema, event[p + 1 : p + 1 + n].decode("utf-8", "replace")
