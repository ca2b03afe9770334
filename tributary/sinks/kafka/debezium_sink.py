"""The debezium Kafka sink: TiCDC's ``kafka://...?protocol=debezium`` for changefeeds.

One message per row change (``debezium``: the key holds the handle key columns, the value the
change event envelope), keyed and partitioned as the URL's ``dispatcher`` says (``index-value``
hashes the message's key columns, so a row's changes stay in order). The URL, topics and the
refusal of a message over ``max-message-bytes`` are shared with the other protocols
(``cdc_base``). Options besides those, each ``true``/``false`` or one of the listed words:

* ``debezium-disable-schema`` (false): payloads only, no ``schema`` (TiCDC's).
* ``debezium-output-old-value`` (true): an update's ``before`` (TiCDC's
  ``[sink.debezium] output-old-value``, carried in the URL here).
* ``debezium-decimal-handling-mode``: ``precise`` (default here, Debezium's: Connect's
  Decimal), ``string``, ``double`` (TiCDC's default; lossy past 15-17 significant digits).
* ``debezium-bigint-unsigned-handling-mode``: ``long`` (int64; a value past 2^63-1 stops the
  changefeed naming the row), ``precise`` (Decimal scale 0), ``string``.
* ``debezium-binary-handling-mode``: ``bytes`` (default here, Debezium's), ``base64``,
  ``base64-url-safe``, ``hex`` (TiCDC's; a string schema).
* ``debezium-propagate-source-type`` (false; ours, Debezium's ``column.propagate.source.type``
  for every column): ``__debezium.source.column.type``, ``.length`` and ``.scale`` in each
  field's parameters, from which Debezium's JDBC sink makes the same column types
  (``varchar(16)``, ``bigint unsigned``, ``datetime(3)``) instead of wider ones
  (``longtext``, which MySQL gives no default).
* ``time-zone`` (UTC): the zone the source shows TIMESTAMP values in (its URL's ``tz``).
* ``debezium-tombstones-on-delete`` (false; ours, Debezium's ``tombstones.on.delete``): a
  message with the key and a null value after each delete, for log compaction.
* ``debezium-schema-change-topic`` (ours): the topic DDL events go to, on every partition,
  instead of every partition of their table's topic (TiCDC's rule). Debezium's MySQL connector
  keeps them on their own topic too; Debezium's JDBC sink stops on a schema change event, so a
  topic it reads must hold none.
* ``enable-tidb-extension``: after each batch a watermark event (``op`` ``m``) at the batch's
  last commit ts on every partition of every topic written so far.

An update that changes the handle key is sent as a delete of the old key (and its tombstone)
and a create of the new one. DDLs also teach the sink the columns' literal defaults, which go
into the field schemas (``debezium_defaults``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from urllib.parse import SplitResult, parse_qsl

from aiokafka import AIOKafkaProducer

from tributary.change import RowChange, TableInfo, Txn
from tributary.settings.parsers import parse_bool
from tributary.sinks.kafka import debezium as dbz
from tributary.sinks.kafka.cdc_base import (
    CdcSettings,
    TopicSink,
    _hash,
    open_producer,
    parse_url,
)
from tributary.sinks.kafka.debezium_defaults import DefaultsFromDdl
from tributary.sinks.kafka.debezium_types import (
    BINARY_MODES,
    DECIMAL_MODES,
    UNSIGNED_MODES,
    Options,
)
from tributary.sinks.port import SinkError, SinkOptions, pending
from tributary.sources.mysql.temporal import zone

_Message = tuple[bytes | None, bytes | None, object]


class DebeziumSettings:
    """The debezium-only options of the sink URL (see the module docstring)."""

    def __init__(self, query: dict[str, str]) -> None:
        def flag(key: str, default: bool) -> bool:
            try:
                return parse_bool(query.get(key, "") or str(default))
            except ValueError:
                raise SinkError(f"debezium sink URL: {key} must be true or false") from None

        def word(key: str, choices: tuple[str, ...]) -> str:
            value = query.get(key, choices[0])
            if value not in choices:
                raise SinkError(f"debezium sink URL: {key} must be one of {choices}: {value!r}")
            return value

        self.with_schema = not flag("debezium-disable-schema", False)
        self.old_value = flag("debezium-output-old-value", True)
        self.tombstones = flag("debezium-tombstones-on-delete", False)
        self.schema_change_topic = query.get("debezium-schema-change-topic", "")
        try:
            tz: dt.tzinfo = zone(query.get("time-zone", "UTC") or "UTC")
        except (ValueError, KeyError) as e:
            raise SinkError(f"debezium sink URL: time-zone: {e}") from e
        self.options = Options(
            decimal=word("debezium-decimal-handling-mode", DECIMAL_MODES),
            unsigned_bigint=word("debezium-bigint-unsigned-handling-mode", UNSIGNED_MODES),
            binary=word("debezium-binary-handling-mode", BINARY_MODES),
            tz=tz,
            propagate=flag("debezium-propagate-source-type", False),
        )


class DebeziumSink(TopicSink):
    """Sends row changes and DDLs in TiCDC's debezium protocol; ``safe_mode`` has no effect."""

    large_hint = ""
    _columns: dict[TableInfo, dbz.TablePlan]

    def __init__(
        self, settings: CdcSettings, dbz_settings: DebeziumSettings, producer: AIOKafkaProducer,
        safe_mode: bool, name: str,
    ) -> None:  # fmt: skip
        super().__init__(settings, producer, safe_mode)
        self.dbz = dbz_settings
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
                    await self._settle(futures)
                    await self._send_ddl(txn, futures)
                    await self._settle(futures)
                    continue
                for change in txn.rows:
                    await self._send_row(change, txn, futures)
            await self._settle(futures)
            last = todo[-1].commit_ts
            if self.settings.extension:
                await self._partition_count(self.settings.topic)
                key, mark = dbz.encode_watermark(last, self.name, with_schema=self.dbz.with_schema)
                for topic, count in self._partitions.items():
                    for p in range(count):
                        futures.append(await self._send(topic, p, key, mark, None, None))
                await self._settle(futures)
            self._checkpoint = last

    async def _send_ddl(self, txn: Txn, futures: list[asyncio.Future[object]]) -> None:
        ddl = txn.ddl
        assert ddl is not None
        self.defaults.observe(ddl)
        self._columns.clear()  # the next rows are planned with what the DDL changed
        if dbz.ddl_change(ddl.query) is None:
            return  # TiCDC sends no event for it either (a view, a grant, ...)
        key, value = dbz.encode_ddl(ddl, txn.commit_ts, self.name, with_schema=self.dbz.with_schema)
        topic = self.dbz.schema_change_topic or self.settings.topic_of(ddl.schema, ddl.table)
        for p in range(await self._partition_count(topic)):
            futures.append(await self._send(topic, p, key, value, txn, None))

    def _plan(self, info: TableInfo) -> dbz.TablePlan:
        plan = self._columns.get(info)
        if plan is None:
            defaults = self.defaults.of(info.schema, info.table)
            plan = dbz.TablePlan.of(info, self.dbz.options, self.name, defaults)
            self._columns[info] = plan
        return plan

    async def _send_row(
        self, change: RowChange, txn: Txn, futures: list[asyncio.Future[object]]
    ) -> None:
        s, t = self.settings, change.table
        plan = self._plan(t)
        topic = s.topic_of(t.schema, t.table)
        count = await self._partition_count(topic)
        for key, value, row in dbz.row_messages(
            change, plan, txn.commit_ts, self.name, with_schema=self.dbz.with_schema,
            old_value=self.dbz.old_value, tombstones=self.dbz.tombstones,
        ):  # fmt: skip
            partition = self._partition(plan, row, txn.commit_ts, count)
            futures.append(await self._send(topic, partition, key, value, txn, change))

    def _partition(self, plan: dbz.TablePlan, row: object, commit_ts: int, count: int) -> int:
        s, t = self.settings, plan.info
        if s.dispatcher == "ts":
            return commit_ts % count
        if s.dispatcher == "index-value":
            values = row if isinstance(row, dict) else {}
            cols = [f.name for f in plan.key] or list(t.where_columns(values))
            return _hash(t.schema, t.table, *(values.get(c) for c in cols)) % count
        return _hash(t.schema, t.table) % count


async def open_url(url: SplitResult, options: SinkOptions) -> DebeziumSink:
    s = parse_url(url, "debezium")
    extra = DebeziumSettings(dict(parse_qsl(url.query, keep_blank_values=True)))
    return DebeziumSink(s, extra, await open_producer(s), options.safe_mode, options.cluster_name)
