"""The secondary-binlog encoder as first written: field by field, each nested message built
and then wrapped with its tag and length. Slow and plain; ``tributary.sinks.kafka.secondary``
must write exactly the same bytes (``tests/unit/test_sinks_kafka_secondary.py`` compares them).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from decimal import Decimal

from tributary.change import Row, RowChange, RowKind, SqlValue, TableInfo, Txn
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka.secondary import SecondaryBinlogError, type_name
from tributary.tidbcodec.enumset import enum_index, set_mask
from tributary.varint import varint

_INTS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
_BLOBS = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_LENGTH = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_DOUBLE = struct.Struct("<d")
_MUTATION = {RowKind.INSERT: 0, RowKind.UPDATE: 1, RowKind.DELETE: 2}


def _flen_decimal(mysql_type: str) -> tuple[int, int]:
    m = _LENGTH.search(mysql_type) if not mysql_type.lower().startswith(("enum", "set")) else None
    if m is None:
        return -1, -1
    return int(m.group(1)), int(m.group(2) or 0)


def _tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _len(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + varint(len(payload)) + payload


def _uint(field: int, value: int) -> bytes:
    return _tag(field, 0) + varint(value)


def _text(value: SqlValue) -> str:
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def _column(value: SqlValue, name: str, ct: ColType, flen: int) -> bytes:
    if value is None:
        return b"\x08\x01"
    if name in _INTS:
        if not isinstance(value, int):
            raise SecondaryBinlogError(f"integer column holds {type(value).__name__} {value!r}")
        return _uint(3 if ct.unsigned else 2, value)
    if name in ("float", "double"):
        if not isinstance(value, int | float | Decimal | str):
            raise SecondaryBinlogError(f"{name} column holds {type(value).__name__}")
        return _tag(4, 1) + _DOUBLE.pack(float(value))
    if name == "enum" or name == "set":
        if isinstance(value, int):
            return _uint(3, value)
        text = value.decode() if isinstance(value, bytes) else str(value)
        return _uint(3, enum_index(ct.elems, text) if name == "enum" else set_mask(ct.elems, text))
    if name == "bit":
        if isinstance(value, int):
            size = max((flen + 7) // 8 if flen > 0 else 1, (value.bit_length() + 7) // 8)
            value = value.to_bytes(size, "big")
        return _len(5, value if isinstance(value, bytes) else str(value).encode())
    if name in _BLOBS or name == "json":
        raw = value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")
        return _len(5, raw)
    raw = value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")
    return _len(6, raw)


def _row(values: Row, cols: list[tuple[str, str, ColType, int]]) -> bytes:
    get = values.get
    return b"".join(_len(1, _column(get(c), name, ct, flen)) for c, name, ct, flen in cols)


def _table_header(info: TableInfo) -> tuple[bytes, bytes, list[tuple[str, str, ColType, int]]]:
    out = [_len(1, info.schema.encode()), _len(2, info.table.encode())]
    plan = []
    for c in info.columns:
        ct = column_type(c.mysql_type)
        name = type_name(ct)
        flen, dec = _flen_decimal(c.mysql_type)
        plan.append((c.name, name, ct, flen))
        ci = (
            _len(1, c.name.encode())
            + _len(2, name.encode())
            + _uint(3, int(c.is_pk))
            + _uint(4, flen)
            + _uint(5, dec)
        )
        out.append(_len(3, ci))
    keys = []
    if info.primary_key:
        keys.append(("PRIMARY", info.primary_key))
    keys += [(u.name, u.columns) for u in info.unique_keys]
    key_bytes = b"".join(
        _len(5, _len(1, n.encode()) + b"".join(_len(2, c.encode()) for c in cs)) for n, cs in keys
    )
    return b"".join(out), key_bytes, plan


def _runs(rows: tuple[RowChange, ...]) -> Iterator[tuple[TableInfo, list[RowChange]]]:
    run: list[RowChange] = []
    for r in rows:
        if run and r.table is not run[0].table and r.table != run[0].table:
            yield run[0].table, run
            run = []
        run.append(r)
    if run:
        yield run[0].table, run


def encode_txn(txn: Txn) -> bytes | None:
    if txn.ddl is not None:
        d = txn.ddl
        ddl = _len(1, d.schema.encode()) + _len(2, d.table.encode()) + _len(3, d.query.encode())
        return _uint(1, 1) + _uint(2, txn.commit_ts) + _len(4, ddl)
    if not txn.rows:
        return None
    tables = []
    for info, changes in _runs(txn.rows):
        head, keys, plan = _table_header(info)
        muts = []
        for ch in changes:
            m = _uint(1, _MUTATION[ch.kind]) + _len(2, _row(ch.values, plan))
            if ch.old_values is not None:
                m += _len(3, _row(ch.old_values, plan))
            muts.append(_len(4, m))
        tables.append(_len(1, head + b"".join(muts) + keys))
    return _uint(1, 0) + _uint(2, txn.commit_ts) + _len(3, b"".join(tables))
