"""The change model: tables, row changes and transactions, as sources produce them and sinks
apply them.

A ``Txn`` is one whole upstream transaction (its row changes in upstream order) or one DDL, or
neither: a checkpoint-only marker that moves the checkpoint over a filtered stretch. Sinks
(``tributary.sinks``) apply batches of them in commit order and keep their own checkpoint, the
commit ts of the last transaction they applied.

Values are plain Python: int, float, str, bytes, Decimal or None. Temporal, decimal and JSON
values arrive already formatted as MySQL literals in str (as tidb-binlog's translator does).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

SqlValue = int | float | str | bytes | Decimal | None
Row = Mapping[str, SqlValue]


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    name: str
    mysql_type: str  # the column's type as written in MySQL DDL, e.g. "bigint unsigned"
    is_pk: bool = False
    unique_keys: frozenset[str] = frozenset()  # names of the unique keys the column is part of
    nullable: bool = True  # False: NOT NULL, when the source knows (a TABLE_MAP's null bitmap)

    @property
    def in_unique_key(self) -> bool:
        return bool(self.unique_keys)


@dataclass(frozen=True, slots=True)
class UniqueKey:
    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table's columns and keys; ``build`` derives the per-column flags from the keys."""

    schema: str
    table: str
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[UniqueKey, ...] = ()
    _by_name: dict[str, ColumnInfo] = field(init=False, repr=False, compare=False, hash=False)
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        by_name = {c.name: c for c in self.columns}
        if len(by_name) != len(self.columns):
            raise ValueError(f"{self.qualified}: duplicate column names")
        for key, cols in (
            ("PRIMARY", self.primary_key),
            *((u.name, u.columns) for u in self.unique_keys),
        ):
            missing = [c for c in cols if c not in by_name]
            if missing or (key != "PRIMARY" and not cols):
                raise ValueError(f"{self.qualified}: key {key} names unknown columns {missing}")
        for c in self.columns:
            uks = frozenset(u.name for u in self.unique_keys if c.name in u.columns)
            if c.is_pk != (c.name in self.primary_key) or c.unique_keys != uks:
                raise ValueError(f"{self.qualified}.{c.name}: flags disagree with the keys")
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_names", tuple(by_name))

    @classmethod
    def build(
        cls,
        schema: str,
        table: str,
        columns: Sequence[tuple[str, str]],
        primary_key: Sequence[str] = (),
        unique_keys: Mapping[str, Sequence[str]] | None = None,
        not_null: Collection[str] = (),
    ) -> TableInfo:
        """From ``(name, mysql_type)`` pairs and key definitions; ``not_null`` names the columns
        known to be NOT NULL."""
        uks = tuple(UniqueKey(n, tuple(cs)) for n, cs in (unique_keys or {}).items())
        cols = tuple(
            ColumnInfo(
                name,
                mysql_type,
                is_pk=name in primary_key,
                unique_keys=frozenset(u.name for u in uks if name in u.columns),
                nullable=name not in not_null,
            )
            for name, mysql_type in columns
        )
        return cls(schema, table, cols, tuple(primary_key), uks)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return self._names

    def column(self, name: str) -> ColumnInfo:
        return self._by_name[name]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def where_columns(self, row: Row) -> tuple[str, ...]:
        """The columns identifying ``row``: the primary key, else the first unique key with no
        NULL in ``row``, else every column present in ``row`` (tidb-binlog's loader rule)."""
        if self.primary_key:
            return self.primary_key
        for uk in self.unique_keys:
            if all(row.get(c) is not None for c in uk.columns):
                return uk.columns
        return tuple(c for c in self.column_names if c in row)


class RowKind(enum.Enum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row change. ``values`` is the new row (insert, update) or the deleted row (delete);
    ``old_values`` is the row before an update and None otherwise."""

    kind: RowKind
    table: TableInfo
    values: Row
    old_values: Row | None = None

    def __post_init__(self) -> None:
        if (self.kind is RowKind.UPDATE) != (self.old_values is not None):
            raise ValueError(f"{self.kind.value} on {self.table.qualified}: old values mismatch")
        known = self.table._by_name.keys()
        for row in (self.values, self.old_values or {}):
            if not row.keys() <= known:
                unknown = [c for c in row if c not in known]
                raise ValueError(f"{self.table.qualified}: unknown columns {unknown}")

    @classmethod
    def decoded(
        cls, kind: RowKind, table: TableInfo, values: Row, old_values: Row | None = None
    ) -> RowChange:
        """A row change without the checks of ``__init__``, for the hot path of decoders whose
        rows hold only ``table``'s columns by construction (old values exactly for updates).
        Everyone else builds row changes the checked way."""
        self = cls.__new__(cls)
        _set_kind(self, kind)
        _set_table(self, table)
        _set_values(self, values)
        _set_old_values(self, old_values)
        return self

    @classmethod
    def insert(cls, table: TableInfo, values: Row) -> RowChange:
        return cls(RowKind.INSERT, table, values)

    @classmethod
    def update(cls, table: TableInfo, old: Row, new: Row) -> RowChange:
        return cls(RowKind.UPDATE, table, new, old)

    @classmethod
    def delete(cls, table: TableInfo, old: Row) -> RowChange:
        return cls(RowKind.DELETE, table, old)


# The slot setters of RowChange: ``decoded`` fills a frozen instance without ``__init__``.
_set_kind, _set_table, _set_values, _set_old_values = (
    RowChange.__dict__[name].__set__ for name in ("kind", "table", "values", "old_values")
)


@dataclass(frozen=True, slots=True)
class Ddl:
    schema: str  # the session's current database when the DDL ran ("" if none)
    query: str
    table: str = ""  # the table the DDL job touched, when known


@dataclass(frozen=True, slots=True)
class Txn:
    """A whole upstream transaction, a DDL, or (neither) a checkpoint-only marker."""

    commit_ts: int
    start_ts: int = 0
    rows: tuple[RowChange, ...] = ()
    ddl: Ddl | None = None
    schema_version: int = 0  # the upstream schema version the rows were decoded with

    def __post_init__(self) -> None:
        if self.commit_ts <= 0 or self.start_ts > self.commit_ts:
            raise ValueError(f"bad timestamps start={self.start_ts} commit={self.commit_ts}")
        if self.rows and self.ddl is not None:
            raise ValueError(f"txn {self.commit_ts} has both rows and a DDL")
