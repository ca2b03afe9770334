"""Kafka downstream: tidb-binlog's secondary binlog (``slave.binlog``), one message per transaction.

``secondary`` converts transactions to and from the messages; ``sink`` is the ``kafka://`` sink
(aiokafka, imported only when a Kafka sink is opened: install the ``kafka`` extra). A URL with
``protocol=canal-json`` opens TiCDC's canal-json sink instead (``canal``, ``canal_sink``),
``protocol=open-protocol`` TiCDC's Open Protocol (``openproto``, ``open_sink``, with the claim
check of ``claimcheck``), ``protocol=debezium`` TiCDC's debezium protocol (``debezium``,
``debezium_types``, ``debezium_schema``, ``debezium_defaults``, ``debezium_sink``),
``protocol=avro`` TiCDC's avro protocol with a schema registry (``avro``, ``avro_types``,
``avro_registry``, ``avro_sink``);
``cdc_base`` holds what those share, ``protocols`` dispatches.
"""

from __future__ import annotations

from urllib.parse import SplitResult

from tributary.sinks.port import Sink, SinkOptions


async def open_url(url: SplitResult, options: SinkOptions) -> Sink:
    """The ``kafka://`` opener for ``sinks.schemes``."""
    from tributary.sinks.kafka import protocols

    return await protocols.open_url(url, options)
