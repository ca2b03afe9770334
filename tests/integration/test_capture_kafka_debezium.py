"""MariaDB written by the mixed workload -> a real capture process -> Kafka (protocol=debezium, a
topic per table, index-value dispatch on 3 partitions, tombstones, DDL on its own topic) ->
Debezium's own JDBC sink connector in a Kafka Connect standalone worker -> another MariaDB: the
checker says equal.

The workload runs its inserts, updates (handle keys changed now and then), deletes and the DDL
Debezium's JDBC sink carries (``schema.evolution=basic``: CREATE TABLE and ADD COLUMN, with the
defaults the schemas carry; ADD INDEX changes no data); its other DDL kinds (DROP/RENAME
COLUMN or TABLE, TRUNCATE) are not applied by that consumer and are left out, as are TIME
values outside a day (the sink turns MicroTime into a LocalTime) and the key-less ``nopk``
table (record_key needs a key; the binlog carries no unique keys). A last insert into every
table makes the sink create or widen each table the workload left without a newer row.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaConsumer

from tests.support.capture import capture_cli, start_capture
from tests.support.kafka_connect import JdbcSinkWorker, run_jdbc_sink
from tests.support.workload_fakes import LoggingTso, LoggingWriter
from tributary.checker.compare import compare
from tributary.checker.report import Report
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import KvDdlHistory
from tributary.tidbcodec import mysqltypes as mt
from tributary.workload import Mixed, MixedOptions, open_upstream, run_workload
from tributary.workload.catalog import Table
from tributary.workload.env import Env
from tributary.workload.mixed_ddl import Ddl, DdlChooser
from tributary.workload.rows import Row
from tributary.workload.txn import TxnContext

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.kafka import KafkaBroker
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.kafka", "tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(420)]

CARRIED_DDL = ("create table", "add column", "add index")
DAY = dt.timedelta(days=1)


class CarriedDdl(DdlChooser):
    def choices(self, env: Env, rng: random.Random) -> list[tuple[str, Ddl]]:
        return [(w, d) for w, d in super().choices(env, rng) if w in CARRIED_DDL]


class SinkableMixed(Mixed):
    """The mixed workload, its DDL and TIME values limited to what the JDBC sink applies."""

    def __init__(self, schema: str, options: MixedOptions) -> None:
        super().__init__(schema, options)
        self.ddl = CarriedDdl(schema, options.max_tables)

    async def new_row(self, ctx: TxnContext, table: Table, rng: random.Random) -> Row:
        return _in_a_day(table, await super().new_row(ctx, table, rng))

    async def _changed(self, ctx: TxnContext, table: Table, old: Row, rng: random.Random) -> Row:
        return _in_a_day(table, await super()._changed(ctx, table, old, rng))


class TouchEveryTable(SinkableMixed):
    """One step: a new row in every table of the schema."""

    async def step(self, env: Env, rng: random.Random) -> None:
        for table in env.catalog.tables(self.schema):
            await env.txns.run([table.id], self._inserts(table.id, 1, rng))


def _in_a_day(table: Table, row: Row) -> Row:
    for col in table.info.row_columns:
        v = row.get(col.name)
        if col.ft.tp == mt.TYPE_DURATION and isinstance(v, dt.timedelta):
            row[col.name] = v % DAY
    return row


async def _messages(bootstrap: str, topic: str) -> list[tuple[Any, Any]]:
    """Every (key, value) of ``topic``, JSON-decoded (a tombstone's value None)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    out = []
    try:
        while batch := await consumer.getmany(timeout_ms=2000):
            for records in batch.values():
                for r in records:
                    key = json.loads(r.key) if r.key else None
                    out.append((key, json.loads(r.value) if r.value else None))
    finally:
        await consumer.stop()
    return out


async def _converged(sink: JdbcSinkWorker, up: str, down: str) -> Report:
    """The checker's report once it says equal (the sink caught up with every topic first)."""
    last = "nothing compared yet"
    try:
        async with asyncio.timeout(180):
            while True:
                await sink.caught_up("dbz_mixed_.*")
                report = await compare(up, down, exclude=["mixed.nopk"])
                if report.equal:
                    return report
                last = report.render_text()
                await asyncio.sleep(1)
    except TimeoutError:
        raise AssertionError(f"the downstream did not converge: {last}") from None


async def test_mixed_workload_through_debeziums_jdbc_sink_is_equal(
    tmp_path: Path,
    etcd: EtcdProcess,
    kafka: KafkaBroker,
    mariadb_instance: InstanceFactory,
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    await down.execute("CREATE DATABASE mixed")
    uri = (
        f"kafka://{kafka.bootstrap}/dbz-ddl?protocol=debezium&topic-rule=dbz_{{schema}}_{{table}}"
        "&debezium-schema-change-topic=dbz-ddl&dispatcher=index-value&partition-num=3"
        "&debezium-bigint-unsigned-handling-mode=precise&debezium-tombstones-on-delete=true"
        "&debezium-propagate-source-type=true"
    )
    config = tmp_path / "cf.toml"
    config.write_text("[filter]\nrules = ['mixed.*', '!mixed.nopk']\n")
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4511", tmp_path / "c.log")
    events: list[tuple[Any, ...]] = []
    history = KvDdlHistory(MemoryKv())
    options = MixedOptions(ddl_ratio=0.06, initial_rows=20, max_rows=6, max_tables=7)
    connector = {
        "topics.regex": "dbz_mixed_.*",
        "connection.url": f"jdbc:mariadb://{down.host}:{down.port}/mixed",
        "connection.username": down.user,
        "connection.password": down.password,
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "primary.key.mode": "record_key",
        "schema.evolution": "basic",
        "collection.name.format": "${source.table}",
    }
    try:
        await capture_cli(
            port, "changefeed", "create", "-c", "to-debezium", "--sink-uri", uri,
            "--config", str(config),
        )  # fmt: skip
        async with open_upstream(up.dsn(), writers=4) as upstream:
            writer, tso = LoggingWriter(events), LoggingTso(events)
            stats = await run_workload(
                SinkableMixed("mixed", options), upstream, writer, tso, history,
                writers=3, txns=240, seed=11,
            )  # fmt: skip
            await run_workload(
                TouchEveryTable("mixed", options), upstream, writer, tso, history,
                writers=1, txns=1, seed=12,
            )  # fmt: skip
        assert stats.commits > 150 and stats.ddls > 5, stats.as_dict()
        assert stats.failures == 0, stats.as_dict()
        with run_jdbc_sink(tmp_path / "connect", kafka.bootstrap, connector) as sink:
            report = await _converged(sink, up.dsn("mixed"), down.dsn("mixed"))
    finally:
        capture.kill()
        capture.wait()

    tables = {t.table for t in report.tables}
    assert {"mixed.sbtest", "mixed.alltypes", "mixed.composite"} <= tables
    assert any(t.startswith("mixed.dyn_") for t in tables)  # made mid-run and carried
    ddl = await _messages(kafka.bootstrap, "dbz-ddl")
    kinds = {
        v["payload"]["tableChanges"][0]["type"] for _, v in ddl if v["payload"]["tableChanges"]
    }
    assert kinds <= {"CREATE", "ALTER"} and "CREATE" in kinds
    assert all(
        v["schema"]["name"] == "io.debezium.connector.mysql.SchemaChangeValue" for _, v in ddl
    )
    rows = await _messages(kafka.bootstrap, "dbz_mixed_sbtest")
    ops = {v["payload"]["op"] for _, v in rows if v is not None}
    assert ops == {"c", "u", "d"}
    assert any(v is None for _, v in rows)  # tombstones after deletes
    key, value = next((k, v) for k, v in rows if v is not None and v["payload"]["op"] == "u")
    assert key["schema"]["name"] == "default.mixed.sbtest.Key"
    assert [f["field"] for f in key["schema"]["fields"]] == ["id"]
    assert value["schema"]["name"] == "default.mixed.sbtest.Envelope"
    source = value["payload"]["source"]
    assert (source["connector"], source["db"], source["table"]) == ("TiCDC", "mixed", "sbtest")
    assert source["commit_ts"] > 0 and value["payload"]["before"] is not None
