"""Value objects shared by the sources and the comparison: table names, columns, shapes.

A ``Shape`` is a table as one source describes it. Its keys follow MySQL's rule for rows
identity: the primary key, else a unique key whose columns are all NOT NULL (a nullable unique
key does not identify rows holding NULL); ``pairing`` falls back to every column when neither
side has one.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.checker.coltypes import ColumnType


@dataclass(frozen=True, slots=True, order=True)
class TableName:
    schema: str
    table: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    declared: str  # the type as the source declares it ("decimal(10,2)", "TEXT")
    nullable: bool = True
    collation: str = ""  # MySQL collation of a character column ("" otherwise)


@dataclass(frozen=True, slots=True)
class Shape:
    name: TableName
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()  # NOT NULL unique keys, shortest first

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True, slots=True)
class Where:
    """A rendered row condition with its parameters ("" selects every row)."""

    sql: str = ""
    args: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class ChunkSum:
    """A chunk's checksum: row count and the sum of the rows' hashes (order-independent, and
    unlike XOR a duplicated row does not cancel out). Sums from SQL and from Python differ for
    the same rows: compare only sums made the same way."""

    count: int
    total: int
