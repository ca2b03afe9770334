"""MariaDB -> a real capture process -> Kafka (canal-json, index-value dispatch on 3 partitions,
TiDB extension, claim check for a row over max-message-bytes) -> a consumer of ours rebuilding
the tables in another MariaDB: the checker says equal. The messages are checked field by field
against Canal's FlatMessage."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import asyncmy.errors
import pytest

from tests.support.canal_consumer import CanalRebuilder
from tests.support.capture import capture_cli, start_capture, write_shop
from tributary.checker.compare import compare
from tributary.checker.errors import CheckerError
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.kafka import KafkaBroker
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.kafka", "tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(300)]

HEAD = ["id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType"]
ROW_FIELDS = [*HEAD, "mysqlType", "old", "data", "_tidb"]  # TiCDC's row order
OTHER_FIELDS = [*HEAD, "mysqlType", "data", "old", "_tidb"]  # DDL and watermark: Canal's


async def converged(
    up: MariaDBServer, down: MariaDBServer, items: int, consumer: asyncio.Task[None]
) -> None:
    last = "nothing compared yet"
    try:
        async with asyncio.timeout(120):
            while True:
                if consumer.done():
                    consumer.result()  # the consumer failed: its error
                try:
                    report = await compare(up.dsn("shop"), down.dsn("shop"))
                    last = report.render_text()
                    if report.equal:
                        n = (await down.query("SELECT COUNT(*) FROM shop.items"))[0][0]
                        last = f"equal, but {n} items"
                        if n == items:
                            return
                except (CheckerError, asyncmy.errors.ProgrammingError) as e:
                    last = str(e)
                await asyncio.sleep(0.5)
    except TimeoutError:
        raise AssertionError(f"downstream did not converge: {last}") from None


BARE = {
    "id": "int", "name": "varchar", "price": "decimal", "at": "datetime", "tags": "set",
    "raw": "varbinary", "n": "tinyint unsigned", "state": "enum", "f": "float",
}  # fmt: skip
FULL = {
    "id": "int(11)", "name": "varchar(32)", "price": "decimal(10,2)", "at": "datetime(3)",
    "tags": "set('a','b','c')", "raw": "varbinary(8)", "n": "tinyint(3) unsigned",
    "state": "enum('new','paid','sent')", "f": "float",
}  # fmt: skip


@pytest.mark.parametrize("compatible", [False, True], ids=["default", "content-compatible"])
async def test_capture_to_kafka_canal_json_rebuilt_equal(
    tmp_path: Path,
    etcd: EtcdProcess,
    kafka: KafkaBroker,
    mariadb_instance: InstanceFactory,
    compatible: bool,
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    topic = f"cdc-canal-{compatible}"
    claims = tmp_path / "claims"
    uri = (
        f"kafka://{kafka.bootstrap}/{topic}?protocol=canal-json&enable-tidb-extension=true"
        "&dispatcher=index-value&partition-num=3&replication-factor=1"
        f"&max-message-bytes=4096&kafka-version=2.4.0&content-compatible={compatible}"
        f"&large-message-handle-option=claim-check&claim-check-storage-uri=file://{claims}"
    )
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4411", tmp_path / "c.log")
    stop = asyncio.Event()
    try:
        await capture_cli(port, "changefeed", "create", "-c", "to-kafka", "--sink-uri", uri)
        await up.execute("CREATE DATABASE shop")
        await up.execute(
            "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(32), price DECIMAL(10,2),"
            " at DATETIME(3), tags SET('a','b','c'), raw VARBINARY(8), n TINYINT UNSIGNED,"
            " state ENUM('new','paid','sent'), f FLOAT)"
        )
        await up.execute("CREATE TABLE shop.events (kind VARCHAR(16), n BIGINT UNSIGNED)")
        await up.execute("CREATE TABLE shop.docs (id INT PRIMARY KEY, body MEDIUMTEXT)")
        for i in range(0, 60, 6):
            await write_shop(
                up,
                [
                    f"INSERT INTO items VALUES ({j}, 'item {j}', {j}.25,"
                    f" '2026-11-21 10:00:00.{j:03d}', 'a,c', X'00ff{j:02x}', {200 + j // 2},"
                    f" 'paid', {j}.1)"
                    for j in range(i, i + 6)
                ]
                + [f"INSERT INTO events VALUES ('made', {2**64 - 1 - i})"],
            )
        await write_shop(
            up,
            [
                "UPDATE items SET price = price * 2, state = 'sent' WHERE id < 10",
                "DELETE FROM items WHERE id BETWEEN 20 AND 29",
                "UPDATE events SET kind = 'seen' WHERE n = 18446744073709551615",
                "INSERT INTO docs VALUES (1, 'short'), (2, REPEAT('z', 6000))",  # over 4096
                "UPDATE docs SET body = REPEAT('y', 5000) WHERE id = 1",
            ],
        )
        await up.execute("ALTER TABLE shop.items ADD COLUMN note VARCHAR(40) DEFAULT 'new'")
        await write_shop(up, ["INSERT INTO items (id, name) VALUES (500, 'after alter')"])

        async with open_sink(f"{down.dsn()}?consistent=true", SinkOptions(cluster_id=77)) as sink:
            consumer = CanalRebuilder(kafka.bootstrap, topic, sink)
            task = asyncio.create_task(consumer.run(stop), name="canal-consumer")
            try:
                await converged(up, down, 51, task)
            finally:
                stop.set()
                await task
    finally:
        capture.kill()
        capture.wait()

    assert {p for p, _ in consumer.raw} == {0, 1, 2}  # index-value spread the rows
    assert all(len(v) <= 4096 for _, v in consumer.raw)
    docs = await down.query("SELECT id, LENGTH(body) FROM shop.docs ORDER BY id")
    assert [tuple(r) for r in docs] == [(1, 5000), (2, 6000)]
    assert len(consumer.claim_checks) == 2 and len(list(claims.iterdir())) == 2
    messages = [json.loads(v) for _, v in consumer.raw]
    refs = [m for m in messages if "claimCheckLocation" in (m.get("_tidb") or {})]
    assert sorted(m["type"] for m in refs) == ["INSERT", "UPDATE"]
    for m in refs:  # TiCDC's reference: the handle key alone, the location in _tidb
        assert m["table"] == "docs" and set(m["data"][0]) == {"id"}
        assert m["sqlType"] == {"id": 4} and m["mysqlType"] == {
            "id": FULL["id"] if compatible else "int"
        }
        assert list(m["_tidb"]) == ["commitTs", "claimCheckLocation"]
        assert m["_tidb"]["claimCheckLocation"].startswith(f"file://{claims}/")
    stored = json.loads(next(claims.iterdir()).read_bytes())
    assert stored["key"] is None and set(stored) == {"key", "value"}
    for m in messages:
        rows = not m["isDdl"] and m["type"] != "TIDB_WATERMARK"
        assert list(m) == (ROW_FIELDS if rows else OTHER_FIELDS)
    ddl = next(m for m in messages if m["isDdl"] and m["sql"].startswith("CREATE TABLE shop.items"))
    assert (ddl["type"], ddl["database"], ddl["pkNames"], ddl["data"]) == (
        "CREATE",
        "shop",
        None,
        None,
    )
    row = next(m for m in messages if m["type"] == "INSERT" and m["data"][0].get("id") == "7")
    assert row["database"] == "shop" and row["table"] == "items" and row["pkNames"] == ["id"]
    assert row["isDdl"] is False and row["sql"] == "" and row["old"] is None
    assert row["data"] == [
        {"id": "7", "name": "item 7", "price": "7.25", "at": "2026-11-21 10:00:00.007",
         "tags": "5", "raw": "\x00\xff\x07", "n": "203", "state": "2", "f": "7.1"}
    ]  # fmt: skip
    assert row["sqlType"] == {
        "id": 4, "name": 12, "price": 3, "at": 93, "tags": -7, "raw": 2004, "n": 5, "state": 4,
        "f": 7,
    }  # fmt: skip
    assert row["mysqlType"] == (FULL if compatible else BARE)
    assert isinstance(row["es"], int) and isinstance(row["ts"], int)
    assert set(row["_tidb"]) == {"commitTs"}
    upd = next(m for m in messages if m["type"] == "UPDATE" and m["table"] == "items")
    assert upd["old"][0]["price"] != upd["data"][0]["price"]
    assert upd["old"][0]["state"] == "2" and upd["data"][0]["state"] == "3"
    assert set(upd["old"][0]) == ({"price", "state"} if compatible else set(upd["data"][0]))
    made = next(m for m in messages if m["table"] == "events" and m["type"] == "INSERT")
    assert made["pkNames"] == [] and made["sqlType"]["n"] == 3  # no key; 2^64-1 is DECIMAL
    marks = [m for m in messages if m["type"] == "TIDB_WATERMARK"]
    assert marks and all(set(m["_tidb"]) == {"watermarkTs"} for m in marks)
