"""Column and table definitions: the MySQL DDL text and the TiDB table info, from one spec.

A :class:`ColumnSpec` carries both what the upstream runs (``BIGINT UNSIGNED NOT NULL``) and
the field type TiDB would record for it (``ColumnType(tp=8, flag=UNSIGNED|NOT_NULL, flen=20)``),
so the rows written into binlogs are encoded with exactly the types the drainer decodes with.
Invariant: a spec's ``ft`` has ``NOT_NULL_FLAG`` exactly when its DDL says ``NOT NULL``.
Example: ``create_table_sql("shop", TableSpec("t", (bigint("id", not_null=True),
varchar("c", 20)), primary_key=("id",)))`` is
``CREATE TABLE `shop`.`t` (`id` BIGINT NOT NULL, `c` VARCHAR(20) NULL, PRIMARY KEY (`id`))``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tributary.ddlhistory import IndexColumn, IndexInfo, TableInfo, table_info
from tributary.sql import MYSQL, quote
from tributary.tidbcodec import mysqltypes as mt

UTF8 = ("utf8mb4", "utf8mb4_bin")
BINARY = ("binary", "binary")


def q(name: str) -> str:
    """A MySQL identifier for DDL text (executed without parameters)."""
    return quote(MYSQL, name, params=False)


def qualified(schema: str, table: str) -> str:
    return f"{q(schema)}.{q(table)}"


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    name: str
    sql: str  # the MySQL type, e.g. "DECIMAL(12,3)"
    ft: mt.ColumnType  # without NOT_NULL_FLAG; see column_type
    not_null: bool = False
    default: str | None = None  # a SQL literal, e.g. "7" or "'x'"

    @property
    def column_type(self) -> mt.ColumnType:
        flag = self.ft.flag | (mt.NOT_NULL_FLAG if self.not_null else 0)
        return dataclasses.replace(self.ft, flag=flag)

    def definition(self) -> str:
        text = f"{q(self.name)} {self.sql} {'NOT NULL' if self.not_null else 'NULL'}"
        return text + (f" DEFAULT {self.default}" if self.default is not None else "")

    def with_name(self, name: str) -> ColumnSpec:
        return dataclasses.replace(self, name=name)


def _ft(
    tp: int,
    flag: int = 0,
    flen: int = -1,
    decimal: int = -1,
    *,
    elems: Sequence[str] = (),
    charset: tuple[str, str] = ("", ""),
) -> mt.ColumnType:
    return mt.ColumnType(tp, flag, flen, decimal, tuple(elems), charset[0], charset[1])


def bigint(name: str, *, unsigned: bool = False, not_null: bool = False) -> ColumnSpec:
    flag = mt.UNSIGNED_FLAG if unsigned else 0
    sql = "BIGINT UNSIGNED" if unsigned else "BIGINT"
    return ColumnSpec(name, sql, _ft(mt.TYPE_LONGLONG, flag, 20, 0), not_null)


def int_(name: str, *, not_null: bool = False, default: str | None = None) -> ColumnSpec:
    return ColumnSpec(name, "INT", _ft(mt.TYPE_LONG, 0, 11, 0), not_null, default)


def varchar(name: str, n: int, *, not_null: bool = False, default: str | None = None) -> ColumnSpec:
    ft = _ft(mt.TYPE_VARCHAR, 0, n, charset=UTF8)
    return ColumnSpec(name, f"VARCHAR({n})", ft, not_null, default)


def char(name: str, n: int, *, not_null: bool = False) -> ColumnSpec:
    return ColumnSpec(name, f"CHAR({n})", _ft(mt.TYPE_STRING, 0, n, charset=UTF8), not_null)


def text(name: str) -> ColumnSpec:
    return ColumnSpec(name, "TEXT", _ft(mt.TYPE_BLOB, mt.BLOB_FLAG, 65535, charset=UTF8))


def decimal(name: str, precision: int, scale: int, *, not_null: bool = False) -> ColumnSpec:
    ft = _ft(mt.TYPE_NEWDECIMAL, 0, precision, scale)
    return ColumnSpec(name, f"DECIMAL({precision},{scale})", ft, not_null)


def datetime(name: str, fsp: int = 0) -> ColumnSpec:
    return ColumnSpec(name, f"DATETIME({fsp})", _ft(mt.TYPE_DATETIME, 0, 19, fsp))


def timestamp(name: str, fsp: int = 0) -> ColumnSpec:
    # Always nullable with an explicit NULL default: never MySQL's implicit ON UPDATE NOW().
    return ColumnSpec(name, f"TIMESTAMP({fsp})", _ft(mt.TYPE_TIMESTAMP, 0, 19, fsp), False, "NULL")


def date(name: str) -> ColumnSpec:
    return ColumnSpec(name, "DATE", _ft(mt.TYPE_DATE, 0, 10, 0))


def time(name: str, fsp: int = 0) -> ColumnSpec:
    return ColumnSpec(name, f"TIME({fsp})", _ft(mt.TYPE_DURATION, 0, 10, fsp))


def year(name: str) -> ColumnSpec:
    return ColumnSpec(name, "YEAR", _ft(mt.TYPE_YEAR, mt.UNSIGNED_FLAG | mt.ZEROFILL_FLAG, 4, 0))


def _literals(elems: Sequence[str]) -> str:
    return ",".join("'" + e.replace("'", "''") + "'" for e in elems)


def enum(name: str, elems: Sequence[str]) -> ColumnSpec:
    ft = _ft(mt.TYPE_ENUM, 0, -1, elems=tuple(elems), charset=UTF8)
    return ColumnSpec(name, f"ENUM({_literals(elems)})", ft)


def set_(name: str, elems: Sequence[str]) -> ColumnSpec:
    ft = _ft(mt.TYPE_SET, 0, -1, elems=tuple(elems), charset=UTF8)
    return ColumnSpec(name, f"SET({_literals(elems)})", ft)


def bit(name: str, n: int) -> ColumnSpec:
    return ColumnSpec(name, f"BIT({n})", _ft(mt.TYPE_BIT, mt.UNSIGNED_FLAG, n, 0))


def json(name: str) -> ColumnSpec:
    flag = mt.BINARY_FLAG | mt.BLOB_FLAG
    return ColumnSpec(name, "JSON", _ft(mt.TYPE_JSON, flag, -1, 0, charset=BINARY))


def blob(name: str) -> ColumnSpec:
    flag = mt.BINARY_FLAG | mt.BLOB_FLAG
    return ColumnSpec(name, "BLOB", _ft(mt.TYPE_BLOB, flag, 65535, charset=BINARY))


def varbinary(name: str, n: int) -> ColumnSpec:
    ft = _ft(mt.TYPE_VARCHAR, mt.BINARY_FLAG, n, charset=BINARY)
    return ColumnSpec(name, f"VARBINARY({n})", ft)


def float_(name: str) -> ColumnSpec:
    return ColumnSpec(name, "FLOAT", _ft(mt.TYPE_FLOAT))


def double(name: str) -> ColumnSpec:
    return ColumnSpec(name, "DOUBLE", _ft(mt.TYPE_DOUBLE))


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    indexes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # non-unique


def _cols(names: Sequence[str]) -> str:
    return "(" + ", ".join(q(n) for n in names) + ")"


def create_table_sql(schema: str, spec: TableSpec) -> str:
    parts = [c.definition() for c in spec.columns]
    if spec.primary_key:
        parts.append(f"PRIMARY KEY {_cols(spec.primary_key)}")
    parts += [f"UNIQUE KEY {q(n)} {_cols(cs)}" for n, cs in spec.unique_keys.items()]
    parts += [f"KEY {q(n)} {_cols(cs)}" for n, cs in spec.indexes.items()]
    return f"CREATE TABLE {qualified(schema, spec.name)} ({', '.join(parts)})"


def build_table_info(table_id: int, spec: TableSpec) -> TableInfo:
    """The table info TiDB would record for ``spec`` (column ids 1.., keys, then indexes)."""
    info = table_info(
        table_id,
        spec.name,
        [(c.name, c.column_type) for c in spec.columns],
        primary_key=spec.primary_key,
        unique_keys=dict(spec.unique_keys),
    )
    for name, cols in spec.indexes.items():
        info = with_index(info, name, cols)
    return info


def with_index(info: TableInfo, name: str, columns: Sequence[str]) -> TableInfo:
    """``info`` with one more non-unique index (the next index id)."""
    if any(i.name.lower() == name.lower() for i in info.indices):
        raise ValueError(f"table {info.name} already has an index {name}")
    index_cols = []
    for n in columns:
        col = info.column(n)
        if col is None:
            raise ValueError(f"table {info.name} has no column {n}")
        index_cols.append(IndexColumn(col.name, col.offset))
    next_id = max((i.id for i in info.indices), default=0) + 1
    index = IndexInfo(next_id, name, tuple(index_cols))
    return dataclasses.replace(info, indices=(*info.indices, index))
