"""Kafka downstream: tidb-binlog's secondary binlog (``slave.binlog``), one message per transaction.

``secondary`` converts transactions to and from the messages; ``sink`` is the ``kafka://`` sink
(aiokafka, imported only when a Kafka sink is opened: install the ``kafka`` extra).
"""

from __future__ import annotations

from urllib.parse import SplitResult

from tributary.sinks.port import Sink, SinkError, SinkOptions


async def open_url(url: SplitResult, options: SinkOptions) -> Sink:
    """The ``kafka://`` opener for ``sinks.registry``."""
    try:
        from tributary.sinks.kafka import sink
    except ImportError as e:  # aiokafka is an extra
        raise SinkError(f"kafka sink needs aiokafka (pip install 'tributary[kafka]'): {e}") from e
    return await sink.open_url(url, options)
