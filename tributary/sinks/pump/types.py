"""TiDB table infos for the tables sinks see: MySQL type strings -> field types, column ids.

A ``change.TableInfo`` names its columns' types as MySQL DDL writes them
(``bigint(20) unsigned``, ``varchar(32) character set latin1``, ``enum('a','b')``); the pump
sink registers each table in the DDL history as the table info TiDB would record for it, so
the drainer decodes the sink's rows with the same types. :func:`column_type` parses a type
string; :func:`tidb_table` builds the table info, keeping the column ids of ``previous`` (the
table's registered info) for columns that keep their name, so the rows a reader decodes with
an older version keep their meaning. Example: ``previous`` has ``id``=1, ``a``=2; the new
columns ``id, b, a`` get ids 1, 3, 2.

The comparison key of a table is its columns, rendered back from the field types
(``ddlhistory.mysql_type``: ``int(11)`` and ``int`` are the same type), and its keys: a table
is registered again only when that key changes.
"""

from __future__ import annotations

import dataclasses

from tributary.change import TableInfo as SinkTable
from tributary.ddlhistory import TableInfo as TidbTable
from tributary.ddlhistory import mysql_type, table_info
from tributary.sinks.lexer import Cursor
from tributary.sinks.port import SinkError
from tributary.tidbcodec import mysqltypes as mt


class UnsupportedType(SinkError):
    """A column type the pump sink cannot encode into TiDB's row format."""


_INTS = {
    "tinyint": (mt.TYPE_TINY, 4),
    "bool": (mt.TYPE_TINY, 1),
    "boolean": (mt.TYPE_TINY, 1),
    "smallint": (mt.TYPE_SHORT, 6),
    "mediumint": (mt.TYPE_INT24, 9),
    "int": (mt.TYPE_LONG, 11),
    "integer": (mt.TYPE_LONG, 11),
    "bigint": (mt.TYPE_LONGLONG, 20),
}
_TEMPORAL = {
    "date": (mt.TYPE_DATE, 10),
    "datetime": (mt.TYPE_DATETIME, 19),
    "timestamp": (mt.TYPE_TIMESTAMP, 19),
    "time": (mt.TYPE_DURATION, 10),
}
_LOBS = {
    "tinytext": (mt.TYPE_TINY_BLOB, 255, False),
    "text": (mt.TYPE_BLOB, 65535, False),
    "mediumtext": (mt.TYPE_MEDIUM_BLOB, 16777215, False),
    "longtext": (mt.TYPE_LONG_BLOB, 4294967295, False),
    "tinyblob": (mt.TYPE_TINY_BLOB, 255, True),
    "blob": (mt.TYPE_BLOB, 65535, True),
    "mediumblob": (mt.TYPE_MEDIUM_BLOB, 16777215, True),
    "longblob": (mt.TYPE_LONG_BLOB, 4294967295, True),
}
_STRINGS = {
    "char": (mt.TYPE_STRING, False),
    "varchar": (mt.TYPE_VARCHAR, False),
    "binary": (mt.TYPE_STRING, True),
    "varbinary": (mt.TYPE_VARCHAR, True),
}
_UTF8 = ("utf8mb4", "utf8mb4_bin")
_BINARY = ("binary", "binary")


def _args(cur: Cursor) -> list[str]:
    """The ``(a, b, ...)`` after a type name (numbers or quoted strings), if any."""
    if not cur.at("("):
        return []
    return [t.text for t in cur.skip_group() if not (t.kind == "punct" and t.text == ",")]


def _modifiers(cur: Cursor) -> tuple[int, str]:
    """UNSIGNED / ZEROFILL / BINARY / CHARACTER SET x / COLLATE y -> (flags, charset)."""
    flag, charset = 0, ""
    while not cur.at_end():
        if cur.accept("UNSIGNED"):
            flag |= mt.UNSIGNED_FLAG
        elif cur.accept("ZEROFILL"):
            flag |= mt.UNSIGNED_FLAG | mt.ZEROFILL_FLAG
        elif cur.accept("SIGNED") or cur.accept("PRECISION"):
            pass
        elif cur.accept("BINARY"):
            flag |= mt.BINARY_FLAG
        elif cur.accept("CHARACTER", "SET") or cur.accept("CHARSET"):
            charset = cur.name().lower()
        elif cur.accept("COLLATE"):
            cur.name()
        else:
            raise ValueError(f"unexpected {cur.next().text!r}")
    return flag, charset


def column_type(text: str) -> mt.ColumnType:
    """The field type TiDB records for a column declared with type ``text``."""
    try:
        cur = Cursor(text)
        name = cur.name().lower()
        args = _args(cur)
        flag, charset = _modifiers(cur)
        return _field_type(name, args, flag, charset)
    except (ValueError, KeyError) as e:
        raise UnsupportedType(f"column type {text!r}: {e}") from e


def _num(args: list[str], i: int, default: int) -> int:
    return int(args[i]) if len(args) > i else default


def _field_type(name: str, args: list[str], flag: int, charset: str) -> mt.ColumnType:
    if name in _INTS:
        tp, width = _INTS[name]
        return mt.ColumnType(tp, flag & ~mt.BINARY_FLAG, _num(args, 0, width), 0)
    if name in ("float", "double", "real"):
        tp = mt.TYPE_FLOAT if name == "float" and _num(args, 0, 0) <= 24 else mt.TYPE_DOUBLE
        return mt.ColumnType(tp, flag & ~mt.BINARY_FLAG)
    if name in ("decimal", "numeric", "dec", "fixed"):
        return mt.ColumnType(mt.TYPE_NEWDECIMAL, flag, _num(args, 0, 10), _num(args, 1, 0))
    if name in _TEMPORAL:
        tp, width = _TEMPORAL[name]
        return mt.ColumnType(tp, 0, width, _num(args, 0, 0))
    if name == "year":
        return mt.ColumnType(mt.TYPE_YEAR, mt.UNSIGNED_FLAG | mt.ZEROFILL_FLAG, 4, 0)
    if name == "bit":
        return mt.ColumnType(mt.TYPE_BIT, mt.UNSIGNED_FLAG, _num(args, 0, 1), 0)
    if name == "json":
        return mt.ColumnType(mt.TYPE_JSON, mt.BINARY_FLAG | mt.BLOB_FLAG, -1, 0, (), *_BINARY)
    if name in ("enum", "set"):
        tp = mt.TYPE_ENUM if name == "enum" else mt.TYPE_SET
        return mt.ColumnType(tp, 0, -1, -1, tuple(args), *_text_charset(charset))
    binary = bool(flag & mt.BINARY_FLAG) or charset == "binary"
    if name in _LOBS:
        tp, width, is_blob = _LOBS[name]
        return _string(tp, mt.BLOB_FLAG, width, binary or is_blob, charset)
    if name in _STRINGS:
        tp, is_binary = _STRINGS[name]
        return _string(
            tp, 0, _num(args, 0, 1 if tp == mt.TYPE_STRING else -1), binary or is_binary, charset
        )
    raise ValueError(f"{name} is not supported")


def _text_charset(charset: str) -> tuple[str, str]:
    return (charset, f"{charset}_bin") if charset else _UTF8


def _string(tp: int, flag: int, flen: int, binary: bool, charset: str) -> mt.ColumnType:
    if binary:
        return mt.ColumnType(tp, flag | mt.BINARY_FLAG, flen, -1, (), *_BINARY)
    return mt.ColumnType(tp, flag, flen, -1, (), *_text_charset(charset))


def comparison_key(table: SinkTable) -> tuple[object, ...]:
    """What must match for a registered table to encode ``table``'s rows (names compared
    case-insensitively, types as TiDB renders them)."""
    cols = tuple((c.name.lower(), mysql_type(column_type(c.mysql_type))) for c in table.columns)
    keys = tuple((u.name.lower(), tuple(n.lower() for n in u.columns)) for u in table.unique_keys)
    return cols, tuple(n.lower() for n in table.primary_key), keys


def tidb_table(table_id: int, table: SinkTable, previous: TidbTable | None) -> TidbTable:
    """The table info to register for ``table`` (see the module docstring for the ids)."""
    info = table_info(
        table_id,
        table.table,
        [(c.name, column_type(c.mysql_type)) for c in table.columns],
        primary_key=table.primary_key,
        unique_keys={u.name: u.columns for u in table.unique_keys},
    )
    if previous is None:
        return info
    ids = {c.name.lower(): c.id for c in previous.columns}
    next_id = max(ids.values(), default=0)
    cols = []
    for c in info.columns:
        cid = ids.get(c.name.lower())
        if cid is None:
            next_id += 1
            cid = next_id
        cols.append(dataclasses.replace(c, id=cid))
    return dataclasses.replace(info, columns=tuple(cols))
