"""Sinks: the downstreams that the drainer and the capture cluster apply transactions to.

``sinks.model`` holds the value objects and the ``Sink`` port; ``sinks.registry.open_sink``
picks an implementation by URL scheme (``sqlite://``, ``blackhole://``).
"""

from tributary.sinks.model import (
    ColumnInfo,
    Ddl,
    RowChange,
    RowKind,
    Sink,
    SinkError,
    SinkOptions,
    TableInfo,
    Txn,
    UniqueKey,
    UnsupportedDdl,
)

__all__ = [
    "ColumnInfo",
    "Ddl",
    "RowChange",
    "RowKind",
    "Sink",
    "SinkError",
    "SinkOptions",
    "TableInfo",
    "Txn",
    "UniqueKey",
    "UnsupportedDdl",
]
