"""Which Kafka sink a ``kafka://`` URL opens: its ``protocol`` parameter decides.

No ``protocol`` (or ``protocol=tidb-binlog``): the drainer's secondary binlog (``kafka.sink``).
``protocol=canal-json``: TiCDC's canal-json, one message per row change (``kafka.canal_sink``).
``protocol=open-protocol``: TiCDC's Open Protocol, row events batched per partition
(``kafka.open_sink``).
``protocol=debezium``: TiCDC's debezium protocol, Debezium's change event envelope in JSON
(``kafka.debezium_sink``).
``protocol=avro``: TiCDC's avro protocol, Confluent's Avro wire format with schemas in a schema
registry (``kafka.avro_sink``).
Anything else is a SinkError listing the known protocols.
"""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qsl, urlencode

from tributary.sinks.port import Sink, SinkError, SinkOptions

PROTOCOLS = ("tidb-binlog", "canal-json", "open-protocol", "debezium", "avro")


def protocol_of(url: SplitResult) -> tuple[str, SplitResult]:
    """The URL's protocol and the URL without that parameter."""
    query = parse_qsl(url.query, keep_blank_values=True)
    protocols = [v for k, v in query if k == "protocol"]
    if len(protocols) > 1:
        raise SinkError("kafka sink URL: protocol given twice")
    rest = urlencode([(k, v) for k, v in query if k != "protocol"])
    return (protocols[0] if protocols else "tidb-binlog"), url._replace(query=rest)


async def open_url(url: SplitResult, options: SinkOptions) -> Sink:
    protocol, rest = protocol_of(url)
    if protocol not in PROTOCOLS:
        known = ", ".join(PROTOCOLS)
        raise SinkError(f"kafka sink URL: unknown protocol {protocol!r}; known: {known}")
    try:  # aiokafka is an extra
        from tributary.sinks.kafka import canal_sink, debezium_sink, open_sink, sink
    except ImportError as e:
        raise SinkError(f"kafka sink needs aiokafka (pip install 'tributary[kafka]'): {e}") from e
    if protocol == "canal-json":
        return await canal_sink.open_url(rest, options)
    if protocol == "open-protocol":
        return await open_sink.open_url(rest, options)
    if protocol == "debezium":
        return await debezium_sink.open_url(rest, options)
    if protocol == "avro":
        try:  # fastavro is the kafka extra's too
            from tributary.sinks.kafka import avro_sink
        except ImportError as e:
            raise SinkError(f"avro needs fastavro (pip install 'tributary[kafka]'): {e}") from e
        return await avro_sink.open_url(rest, options)
    return await sink.open_url(rest, options)
