"""Sinks: the downstreams that the drainer and the capture cluster apply transactions to.

``sinks.port`` holds the ``Sink`` port, its options and errors; ``sinks.registry.open_sink``
picks an implementation by URL scheme (``sqlite://``, ``blackhole://``). What sinks apply is the
change model, ``tributary.change``.
"""

from tributary.sinks.port import Sink, SinkError, SinkOptions, UnsupportedDdl, pending

__all__ = ["Sink", "SinkError", "SinkOptions", "UnsupportedDdl", "pending"]
