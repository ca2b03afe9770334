"""The change model shared by sources, sinks, staging, the checker and the load generator.

``change.model`` holds the value objects (``Txn``, ``RowChange``, ``Ddl``, ``TableInfo``, ...);
``change.filter`` the table filters that decide which upstream tables replicate.
"""

from tributary.change.filter import DEFAULT_IGNORE_DBS, FilterError, TableFilter, parse_table
from tributary.change.model import (
    ColumnInfo,
    Ddl,
    Row,
    RowChange,
    RowKind,
    SqlValue,
    TableInfo,
    Txn,
    UniqueKey,
)

__all__ = [
    "DEFAULT_IGNORE_DBS",
    "ColumnInfo",
    "Ddl",
    "FilterError",
    "Row",
    "RowChange",
    "RowKind",
    "SqlValue",
    "TableFilter",
    "TableInfo",
    "Txn",
    "UniqueKey",
    "parse_table",
]
