"""A column's type as written in MySQL DDL, from TiDB's field type (``types.FieldType``).

Sinks receive it in ``change.ColumnInfo.mysql_type``. Display widths are left out
(``int``, not ``int(11)``); lengths that change the type are kept (``varchar(20)``,
``decimal(10,2)``, ``datetime(3)``, ``bit(8)``). Example: ``Tp=8, Flag=UNSIGNED`` ->
``bigint unsigned``; ``Tp=15, Flen=20, Charset=binary`` -> ``varbinary(20)``.
"""

from __future__ import annotations

from tributary.tidbcodec import mysqltypes as mt

_INTS = {
    mt.TYPE_TINY: "tinyint",
    mt.TYPE_SHORT: "smallint",
    mt.TYPE_INT24: "mediumint",
    mt.TYPE_LONG: "int",
    mt.TYPE_LONGLONG: "bigint",
}
_BLOBS = {
    mt.TYPE_TINY_BLOB: ("tinyblob", "tinytext"),
    mt.TYPE_BLOB: ("blob", "text"),
    mt.TYPE_MEDIUM_BLOB: ("mediumblob", "mediumtext"),
    mt.TYPE_LONG_BLOB: ("longblob", "longtext"),
}
_TEMPORAL = {
    mt.TYPE_DATETIME: "datetime",
    mt.TYPE_TIMESTAMP: "timestamp",
    mt.TYPE_DURATION: "time",
}
_PLAIN = {
    mt.TYPE_DATE: "date",
    mt.TYPE_NEWDATE: "date",
    mt.TYPE_YEAR: "year",
    mt.TYPE_JSON: "json",
    mt.TYPE_FLOAT: "float",
    mt.TYPE_DOUBLE: "double",
    mt.TYPE_GEOMETRY: "geometry",
}


def _quoted(elems: tuple[str, ...]) -> str:
    return ",".join("'" + e.replace("\\", "\\\\").replace("'", "''") + "'" for e in elems)


def mysql_type(ft: mt.ColumnType) -> str:
    tp = ft.tp
    unsigned = " unsigned" if ft.unsigned else ""
    if tp in _INTS:
        return _INTS[tp] + unsigned
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        return _PLAIN[tp] + unsigned
    if tp in mt.DECIMAL_TYPES:
        if ft.flen > 0 and ft.decimal >= 0:
            return f"decimal({ft.flen},{ft.decimal}){unsigned}"
        return "decimal" + unsigned
    if tp in _TEMPORAL:
        return _TEMPORAL[tp] + (f"({ft.fsp})" if ft.fsp else "")
    if tp in _PLAIN:
        return _PLAIN[tp]
    if tp == mt.TYPE_BIT:
        return f"bit({ft.flen})" if ft.flen > 0 else "bit"
    if tp in (mt.TYPE_ENUM, mt.TYPE_SET):
        return ("enum" if tp == mt.TYPE_ENUM else "set") + f"({_quoted(ft.elems)})"
    return _string_type(ft)


def _string_type(ft: mt.ColumnType) -> str:
    binary = ft.is_binary_string
    if ft.tp in _BLOBS:
        return _BLOBS[ft.tp][0 if binary else 1]
    length = f"({ft.flen})" if ft.flen >= 0 else ""
    if ft.tp == mt.TYPE_STRING:
        return ("binary" if binary else "char") + length
    if ft.tp in (mt.TYPE_VARCHAR, mt.TYPE_VAR_STRING):
        return ("varbinary" if binary else "varchar") + length
    return f"unknown type {ft.tp}"
