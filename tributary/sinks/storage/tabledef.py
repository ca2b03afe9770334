"""TiCDC's table definition (``schema_<version>_<checksum>.json``): written and read back.

The JSON is TiCDC's ``TableDefinition`` as Go's ``json.MarshalIndent(def, "", "    ")`` writes
it (``pkg/sink/cloudstorage/table_definition.go``): ``Table``, ``Schema``, ``Version`` (1),
``TableVersion``, ``Query``, ``Type`` (TiDB's DDL action type), ``TableColumns`` (each with
``ColumnName``, ``ColumnType`` such as ``INT UNSIGNED`` or ``VARCHAR``, and, when they apply,
``ColumnPrecision``, ``ColumnScale``, ``ColumnNullable`` "false", ``ColumnIsPk`` "true") and
``TableColumnsTotal``. The checksum in the file name is TiCDC's: the CRC-32 (IEEE) of the same
JSON without ``Query``, ``Type`` and ``TableVersion``, ``Version`` 0 and the columns sorted by
name. TiCDC's own example, the database ``schema1`` at version 100, is
``schema1/meta/schema_100_3233644819.json``.

Column attributes come from the column's MySQL type as the binlog gives it: the precision of
``varchar(32)`` is 32, of ``decimal(10,2)`` 10 with scale 2, of an ``int`` without a display
width TiDB's default (11; 10 unsigned), of a ``text`` 65535; ``datetime(3)`` has scale 3.
What the binlog does not carry is left out: a column's default, and ``ColumnNullable`` of a
NOT NULL column outside the primary key (every primary key column is written NOT NULL).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tributary.change import ColumnInfo, TableInfo
from tributary.sinks.file.pbcodec import column_type
from tributary.sinks.kafka.canal import jstr
from tributary.sinks.kafka.secondary import type_name
from tributary.sinks.port import SinkError

DEFINITION_VERSION = 1
_LENGTH = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
# TiDB's display widths of integer types without one: (signed, unsigned)
_INT_WIDTHS = {
    "tinyint": (4, 3),
    "smallint": (6, 5),
    "mediumint": (9, 8),
    "int": (11, 10),
    "bigint": (20, 20),
}
_DEFAULT_LENGTHS = {
    "float": 12,
    "double": 22,
    "decimal": 10,
    "bit": 1,
    "year": 4,
    "char": 1,
    "binary": 1,
    "varchar": 5,
    "varbinary": 5,
    "tinytext": 255,
    "tinyblob": 255,
    "text": 65535,
    "blob": 65535,
    "mediumtext": 16777215,
    "mediumblob": 16777215,
    "longtext": 4294967295,
    "longblob": 4294967295,
}
_TEMPORAL = frozenset({"datetime", "timestamp", "time"})
_FRACTIONAL = frozenset({"float", "double"})


@dataclass(frozen=True, slots=True)
class TableCol:
    """One entry of ``TableColumns``; "" leaves a field out (Go's ``omitempty``)."""

    name: str
    type: str  # TiDB's type name in capitals, `` UNSIGNED`` appended
    precision: str = ""
    scale: str = ""
    nullable: str = ""  # "false" for NOT NULL
    is_pk: str = ""  # "true" for a primary key column
    default: object = None  # never known here; kept for TiCDC's layout of the field

    def fields(self) -> list[tuple[str, str]]:
        pairs = [("ColumnName", jstr(self.name)), ("ColumnType", jstr(self.type))]
        if self.default is not None:
            pairs.append(("ColumnDefault", _go_json(self.default)))
        for key, value in (
            ("ColumnPrecision", self.precision),
            ("ColumnScale", self.scale),
            ("ColumnNullable", self.nullable),
            ("ColumnIsPk", self.is_pk),
        ):
            if value:
                pairs.append((key, jstr(value)))
        return pairs


def column_of(col: ColumnInfo) -> TableCol:
    """TiCDC's ``TableCol`` of a column (``FromTiColumnInfo``), from its MySQL type."""
    ct = column_type(col.mysql_type)
    name = type_name(ct)
    m = _LENGTH.search(col.mysql_type) if name not in ("enum", "set") else None
    flen = int(m.group(1)) if m else None
    decimal = int(m.group(2)) if m and m.group(2) is not None else None
    precision = scale = ""
    if name in _INT_WIDTHS:
        precision = str(flen if flen is not None else _INT_WIDTHS[name][ct.unsigned])
    elif name == "decimal":
        precision = str(flen if flen is not None else 10)
        scale = str(decimal if decimal is not None else 0)
    elif name in _FRACTIONAL:
        precision = str(flen if flen is not None else _DEFAULT_LENGTHS[name])
        scale = str(decimal) if decimal else ""
    elif name in _TEMPORAL:
        scale = str(flen) if flen else ""  # datetime(3): the fsp is the type's decimal
    elif name in _DEFAULT_LENGTHS:
        precision = str(flen if flen is not None else _DEFAULT_LENGTHS[name])
    unsigned = " UNSIGNED" if ct.unsigned else ""
    return TableCol(
        name=col.name,
        type=name.upper() + unsigned,
        precision=precision,
        scale=scale,
        nullable="false" if col.is_pk else "",
        is_pk="true" if col.is_pk else "",
    )


@dataclass(frozen=True, slots=True)
class TableDefinition:
    schema: str
    table: str  # "" for a database
    table_version: int
    columns: tuple[TableCol, ...] | None  # None: TiCDC's null (a database, an unknown table)
    query: str = ""
    type: int = 0  # TiDB's DDL action type; 0 for a table version without a DDL

    @classmethod
    def of(cls, info: TableInfo, version: int) -> TableDefinition:
        return cls(info.schema, info.table, version, tuple(column_of(c) for c in info.columns))

    @property
    def total(self) -> int:
        return len(self.columns or ())

    def render(self) -> bytes:
        """The schema file's bytes (``MarshalWithQuery``)."""
        return _indented(
            [
                ("Table", jstr(self.table)),
                ("Schema", jstr(self.schema)),
                ("Version", str(DEFINITION_VERSION)),
                ("TableVersion", str(self.table_version)),
                ("Query", jstr(self.query)),
                ("Type", str(self.type)),
                ("TableColumns", _columns(self.columns)),
                ("TableColumnsTotal", str(self.total)),
            ]
        ).encode()

    def checksum(self) -> int:
        """TiCDC's ``Sum32``: CRC-32 of the definition without query, version and type."""
        ordered = tuple(sorted(self.columns or (), key=lambda c: c.name.encode()))
        text = _indented(
            [
                ("Table", jstr(self.table)),
                ("Schema", jstr(self.schema)),
                ("Version", "0"),
                ("TableColumns", _columns(ordered)),
                ("TableColumnsTotal", str(self.total)),
            ]
        )
        return zlib.crc32(text.encode())

    def table_info(self) -> TableInfo:
        """The table as the sinks take it: each column's MySQL type rebuilt from its entry."""
        cols = self.columns or ()
        pk = [c.name for c in cols if c.is_pk == "true"]
        return TableInfo.build(self.schema, self.table, [(c.name, mysql_type(c)) for c in cols], pk)


def mysql_type(col: TableCol) -> str:
    """A MySQL type for an entry: ``VARCHAR`` 32 -> ``varchar(32)``, ``INT UNSIGNED`` ->
    ``int unsigned``, ``DECIMAL`` 10,2 -> ``decimal(10,2)``, ``DATETIME`` scale 3 ->
    ``datetime(3)``; ENUM and SET without their members (TiCDC does not write them)."""
    base, _, rest = col.type.lower().partition(" ")
    unsigned = f" {rest}" if rest else ""
    if base == "decimal":
        return f"decimal({col.precision or 10},{col.scale or 0}){unsigned}"
    if base in ("char", "varchar", "binary", "varbinary", "bit") and col.precision:
        return f"{base}({col.precision}){unsigned}"
    if base in _TEMPORAL and col.scale:
        return f"{base}({col.scale})"
    return base + unsigned


class TableDefinitionError(SinkError, ValueError):
    """A schema file that is not TiCDC's table definition."""


def parse(data: bytes | str) -> TableDefinition:
    """A schema file read back; TableDefinitionError when it is not TiCDC's table definition."""
    try:
        doc = json.loads(data)
        if not isinstance(doc, Mapping) or not isinstance(doc.get("Schema"), str):
            raise TableDefinitionError("not a table definition: no Schema")
        raw = doc.get("TableColumns")
        if raw is not None and not isinstance(raw, list):
            raise TableDefinitionError("TableColumns is not a list")
        columns = None if raw is None else tuple(_parse_column(c) for c in raw)
        if len(columns or ()) != int(doc.get("TableColumnsTotal", 0)):
            raise TableDefinitionError("TableColumnsTotal does not count TableColumns")
        return TableDefinition(
            schema=doc["Schema"],
            table=str(doc.get("Table", "")),
            table_version=int(doc["TableVersion"]),
            columns=columns,
            query=str(doc.get("Query", "")),
            type=int(doc.get("Type", 0)),
        )
    except TableDefinitionError:
        raise
    except (ValueError, TypeError, KeyError) as e:  # JSON, a number's text, a missing key
        raise TableDefinitionError(f"not a table definition: {e!r}") from e


def _parse_column(raw: Any) -> TableCol:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("ColumnName"), str):
        raise TableDefinitionError(f"not a column definition: {raw!r}")
    return TableCol(
        name=raw["ColumnName"],
        type=str(raw.get("ColumnType", "")),
        precision=str(raw.get("ColumnPrecision", "")),
        scale=str(raw.get("ColumnScale", "")),
        nullable=str(raw.get("ColumnNullable", "")),
        is_pk=str(raw.get("ColumnIsPk", "")),
        default=raw.get("ColumnDefault"),
    )


def _columns(columns: Sequence[TableCol] | None) -> str:
    if columns is None:
        return "null"
    if not columns:
        return "[]"
    items = []
    for c in columns:
        body = ",\n".join(f"            {_key(k)}: {v}" for k, v in c.fields())
        items.append("        {\n" + body + "\n        }")
    return "[\n" + ",\n".join(items) + "\n    ]"


def _key(name: str) -> str:
    return f'"{name}"'


def _indented(pairs: list[tuple[str, str]]) -> str:
    return "{\n" + ",\n".join(f"    {_key(k)}: {v}" for k, v in pairs) + "\n}"


def _go_json(value: object) -> str:
    """A default value as Go's encoder writes it (strings HTML-escaped, integers as is)."""
    if isinstance(value, str):
        return jstr(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return json.dumps(value)
    return str(value)
