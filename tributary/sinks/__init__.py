"""Sinks: the downstreams that the drainer and the capture cluster apply transactions to.

``sinks.port`` holds the ``Sink`` port, its options and errors. Each backend is a subpackage
(``mysql``, ``sqlite``, ``pump``, ``file``, ``blackhole``, ``print``); ``sinks.schemes.open_sink``
picks one by URL scheme. Shared by the backends: ``checkpoint``, ``compact``, ``lexer``, ``urls``.
What sinks apply is the change model, ``tributary.change``.
"""

from tributary.sinks.port import (
    GatesWrites,
    Pipelined,
    QueryTimer,
    Sink,
    SinkError,
    SinkOptions,
    TimesQueries,
    UnsupportedDdl,
    WriteGate,
    WriteRefused,
    pending,
)

__all__ = [
    "GatesWrites",
    "Pipelined",
    "QueryTimer",
    "Sink",
    "SinkError",
    "SinkOptions",
    "TimesQueries",
    "UnsupportedDdl",
    "WriteGate",
    "WriteRefused",
    "pending",
]
