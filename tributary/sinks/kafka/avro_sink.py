"""The avro Kafka sink: TiCDC's ``kafka://...?protocol=avro`` for changefeeds, with a registry.

One message per row change (``avro``: the key holds the handle key columns, the value the row,
both in Confluent's Avro wire format), keyed and partitioned as the URL's ``dispatcher`` says.
Each table has its own topic: ``topic-rule`` must hold ``{schema}`` and ``{table}`` (TiCDC's
rule: subjects follow Confluent's TopicNameStrategy, ``<topic>-key`` and ``<topic>-value``
with ``.`` in the topic written ``_``, so a topic holds one table's schemas). The schemas are
registered in the registry of ``schema-registry`` (required) before the first row of each
table version; a DDL makes the next rows register their table's new schema, which the registry
accepts or refuses under its compatibility rule (a refusal stops the changefeed with the
registry's message, as in TiCDC; see ``avro_registry``). DDLs and watermarks are not sent.

Options, besides those all TiCDC protocols share (``cdc_base``):

* ``schema-registry`` (required): ``http[s]://[USER:PASSWORD@]HOST:PORT``, URL-encoded.
* ``avro-decimal-handling-mode``: ``precise`` (default, Avro's decimal) or ``string``.
* ``avro-bigint-unsigned-handling-mode``: ``long`` (default; a value over 2^63-1 stops the
  changefeed naming the row, where TiCDC would wrap it) or ``string``.
* ``enable-tidb-extension``: ``_tidb_op``, ``_tidb_commit_ts`` and
  ``_tidb_commit_physical_time`` in every value.

Literal column defaults learnt from the DDL the changefeed carries go into the value schemas
(``debezium_defaults``), so that adding a NOT NULL column with a default stays compatible.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from urllib.parse import SplitResult, parse_qsl

from aiokafka import AIOKafkaProducer

from tributary.change import RowChange, TableInfo, Txn
from tributary.sinks.kafka import avro
from tributary.sinks.kafka.avro_registry import SchemaRegistry, parse_registry_url
from tributary.sinks.kafka.avro_types import DECIMAL_MODES, UNSIGNED_MODES, AvroError, Options
from tributary.sinks.kafka.cdc_base import CdcSettings, TopicSink, _hash, open_producer, parse_url
from tributary.sinks.kafka.debezium_defaults import DefaultsFromDdl
from tributary.sinks.port import SinkError, SinkOptions, pending


class AvroSettings:
    """The avro-only options of the sink URL (see the module docstring)."""

    def __init__(self, query: dict[str, str], s: CdcSettings) -> None:
        def word(key: str, choices: tuple[str, ...]) -> str:
            value = query.get(key, choices[0]) or choices[0]
            if value not in choices:
                raise SinkError(f"avro sink URL: {key} must be one of {choices}: {value!r}")
            return value

        self.registry = query.get("schema-registry", "")
        if not self.registry:
            raise SinkError(
                "avro sink URL: schema-registry=http://HOST:PORT is required (TiCDC's "
                "--schema-registry)"
            )
        parse_registry_url(self.registry)
        if "{schema}" not in s.topic_rule or "{table}" not in s.topic_rule:
            raise SinkError(
                "avro sink URL: topic-rule must hold {schema} and {table} (one table per "
                f"topic: subjects are named after topics), not {s.topic_rule!r}"
            )
        self.options = Options(
            decimal=word("avro-decimal-handling-mode", DECIMAL_MODES),
            unsigned_bigint=word("avro-bigint-unsigned-handling-mode", UNSIGNED_MODES),
        )


class _Registered:
    """A table version's plan with the ids its key and value schemas got."""

    __slots__ = ("key_id", "plan", "topic", "value_id")

    def __init__(self, plan: avro.TablePlan, key_id: int, value_id: int, topic: str) -> None:
        self.plan, self.key_id, self.value_id, self.topic = plan, key_id, value_id, topic


class AvroSink(TopicSink):
    """Sends row changes in TiCDC's avro protocol; ``safe_mode`` has no effect."""

    large_hint = ""
    _columns: dict[TableInfo, _Registered]

    def __init__(
        self, settings: CdcSettings, avro_settings: AvroSettings, producer: AIOKafkaProducer,
        registry: SchemaRegistry, safe_mode: bool, name: str,
    ) -> None:  # fmt: skip
        super().__init__(settings, producer, safe_mode)
        self.avro = avro_settings
        self.registry = registry
        self.name = name
        self.defaults = DefaultsFromDdl()

    async def apply(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            todo = pending(txns, self._checkpoint)
            if not todo:
                return
            futures: list[asyncio.Future[object]] = []
            for txn in todo:
                if txn.ddl is not None:
                    self.defaults.observe(txn.ddl)
                    self._columns.clear()  # the next rows register what the DDL changed
                    continue
                for change in txn.rows:
                    await self._send_row(change, txn, futures)
            await self._settle(futures)
            self._checkpoint = todo[-1].commit_ts

    async def _registered(self, info: TableInfo) -> _Registered:
        known = self._columns.get(info)
        if known is not None:
            return known
        defaults = self.defaults.of(info.schema, info.table)
        plan = avro.TablePlan.of(
            info, self.avro.options, self.name, defaults, extension=self.settings.extension
        )
        topic = self.settings.topic_of(info.schema, info.table)
        subject = avro.subject_topic(topic)
        key_id = await self.registry.register(f"{subject}-key", plan.key.text)
        value_id = await self.registry.register(f"{subject}-value", plan.value.text)
        known = self._columns[info] = _Registered(plan, key_id, value_id, topic)
        return known

    async def _send_row(
        self, change: RowChange, txn: Txn, futures: list[asyncio.Future[object]]
    ) -> None:
        reg = await self._registered(change.table)
        plan = reg.plan
        count = await self._partition_count(reg.topic)
        for row, is_delete in avro.row_messages(change, plan, txn.commit_ts):
            try:
                key = avro.frame(reg.key_id, plan.key_body(row))
                value = (
                    None
                    if is_delete
                    else avro.frame(reg.value_id, plan.value_body(row, change.kind, txn.commit_ts))
                )
            except (ValueError, TypeError, ArithmeticError, UnicodeDecodeError) as e:
                raise AvroError(
                    f"avro sink: txn {txn.commit_ts}: {change.table.qualified}: cannot write a "
                    f"row: {e}"
                ) from e
            partition = self._partition(plan, row, txn.commit_ts, count)
            futures.append(await self._send(reg.topic, partition, key, value, txn, change))

    def _partition(self, plan: avro.TablePlan, row: object, commit_ts: int, count: int) -> int:
        s, t = self.settings, plan.info
        if s.dispatcher == "ts":
            return commit_ts % count
        if s.dispatcher == "index-value":
            values = row if isinstance(row, Mapping) else {}
            cols = [f.column for f in plan.key.fields]
            return _hash(t.schema, t.table, *(values.get(c) for c in cols)) % count
        return _hash(t.schema, t.table) % count

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self.registry.close()


async def open_url(url: SplitResult, options: SinkOptions) -> AvroSink:
    s = parse_url(url, "avro")
    extra = AvroSettings(dict(parse_qsl(url.query, keep_blank_values=True)), s)
    registry = await SchemaRegistry(extra.registry, s.ack_timeout).__aenter__()
    try:
        producer = await open_producer(s)
    except BaseException:
        await registry.close()
        raise
    return AvroSink(s, extra, producer, registry, options.safe_mode, options.cluster_name)
