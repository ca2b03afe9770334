"""MariaDB -> a real capture process -> Kafka (Open Protocol, index-value dispatch on 3
partitions, claim check for a row over max-message-bytes) -> a consumer of ours rebuilding the
tables in another MariaDB: the checker says equal. The messages are unpacked by hand and their
events checked field by field against TiCDC's documented format."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import asyncmy.errors
import pytest

from tests.support.capture import capture_cli, start_capture, write_shop
from tests.support.open_consumer import OpenRebuilder
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


def unpack(key: bytes, value: bytes) -> list[tuple[dict[str, object], bytes]]:
    """(event key, event value) pairs by the documented layout: version 1, then big-endian
    int64 lengths before each event key and each event value."""
    assert struct.unpack(">q", key[:8]) == (1,)
    out, k, v = [], 8, 0
    while k < len(key):
        (kl,), (vl,) = struct.unpack(">q", key[k : k + 8]), struct.unpack(">q", value[v : v + 8])
        out.append((json.loads(key[k + 8 : k + 8 + kl]), value[v + 8 : v + 8 + vl]))
        k, v = k + 8 + kl, v + 8 + vl
    assert (k, v) == (len(key), len(value))
    return out


async def test_capture_to_kafka_open_protocol_rebuilt_equal(
    tmp_path: Path, etcd: EtcdProcess, kafka: KafkaBroker, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    topic = "cdc-open"
    claims = tmp_path / "claims"
    uri = (
        f"kafka://{kafka.bootstrap}/{topic}?protocol=open-protocol&dispatcher=index-value"
        "&partition-num=3&replication-factor=1&max-message-bytes=4096&kafka-version=2.4.0"
        f"&large-message-handle-option=claim-check&claim-check-storage-uri=file://{claims}"
    )
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4412", tmp_path / "c.log")
    stop = asyncio.Event()
    try:
        await capture_cli(port, "changefeed", "create", "-c", "to-open", "--sink-uri", uri)
        await up.execute("CREATE DATABASE shop")
        await up.execute(
            "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(32), price DECIMAL(10,2),"
            " at DATETIME(3), tags SET('a','b','c'), raw VARBINARY(8), n TINYINT UNSIGNED,"
            " doc MEDIUMBLOB)"
        )
        await up.execute("CREATE TABLE shop.events (kind VARCHAR(16), n BIGINT UNSIGNED)")
        for i in range(0, 60, 6):
            await write_shop(
                up,
                [
                    f"INSERT INTO items VALUES ({j}, 'item {j}', {j}.25,"
                    f" '2026-11-21 10:00:00.{j:03d}', 'a,c', X'00ff{j:02x}', {200 + j // 2}, NULL)"
                    for j in range(i, i + 6)
                ]
                + [f"INSERT INTO events VALUES ('made', {2**64 - 1 - i})"],
            )
        await write_shop(
            up,
            [
                "UPDATE items SET price = price * 2 WHERE id < 10",
                "DELETE FROM items WHERE id BETWEEN 20 AND 29",
                "UPDATE events SET kind = 'seen' WHERE n = 18446744073709551615",
                "UPDATE items SET doc = REPEAT('z', 6000) WHERE id = 33",  # over 4096 bytes
            ],
        )
        await up.execute("ALTER TABLE shop.items ADD COLUMN note VARCHAR(40) DEFAULT 'new'")
        await write_shop(up, ["INSERT INTO items (id, name) VALUES (500, 'after alter')"])

        async with open_sink(f"{down.dsn()}?consistent=true", SinkOptions(cluster_id=78)) as sink:
            consumer = OpenRebuilder(kafka.bootstrap, topic, sink)
            task = asyncio.create_task(consumer.run(stop), name="open-consumer")
            try:
                await converged(up, down, 51, task)
            finally:
                stop.set()
                await task
    finally:
        capture.kill()
        capture.wait()

    assert (await down.query("SELECT LENGTH(doc) FROM shop.items WHERE id = 33"))[0][0] == 6000
    assert len(consumer.claim_checks) == 1 and list(claims.iterdir())
    assert {p for p, _, _ in consumer.raw} == {0, 1, 2}
    events = [(p, k, v) for p, key, value in consumer.raw for k, v in unpack(key, value)]
    assert all(len(key) + len(value) <= 4096 for _, key, value in consumer.raw)
    assert max(len(unpack(key, value)) for _, key, value in consumer.raw) > 1  # batched
    create = [(p, k, json.loads(v)) for p, k, v in events if k["t"] == 2 and b"CREATE TABLE" in v]
    items = [(p, k, v) for p, k, v in create if k.get("tbl") == "items"]
    assert sorted(p for p, _, _ in items) == [0, 1, 2]  # a DDL on every partition
    _, k, v = items[0]
    assert list(k) == ["ts", "scm", "tbl", "t"] and (k["scm"], k["t"]) == ("shop", 2)
    assert v["t"] == 3 and v["q"].startswith("CREATE TABLE shop.items")
    rows = [(k, json.loads(v)) for _, k, v in events if k["t"] == 1 and k["tbl"] == "items"]
    k, v = next((k, v) for k, v in rows if "u" in v and v["u"]["id"]["v"] == 7 and "p" not in v)
    assert list(k) == ["ts", "scm", "tbl", "t"] and (k["scm"], k["tbl"]) == ("shop", "items")
    u = v["u"]
    assert list(u) == sorted(u)
    assert u["id"] == {"t": 3, "h": True, "f": 11, "v": 7}
    assert u["name"] == {"t": 15, "f": 0, "v": "item 7"}
    assert u["price"] == {"t": 246, "f": 1, "v": "7.25"}
    assert u["at"] == {"t": 12, "f": 1, "v": "2026-11-21 10:00:00.007"}
    assert u["tags"] == {"t": 248, "f": 0, "v": 5}
    assert u["raw"] == {"t": 15, "f": 1, "v": "\\x00\\xff\\a"}
    assert u["n"] == {"t": 1, "f": 0x81, "v": 203}
    assert u["doc"] == {"t": 250, "f": 1, "v": None}
    upd = next(v for _, v in rows if "p" in v and v["u"]["id"]["v"] == 3)
    assert upd["p"]["price"]["v"] == "3.25" and upd["u"]["price"]["v"] == "6.50"
    assert any("d" in v and set(v["d"]) >= {"id", "name"} for _, v in rows)
    ref = next(k for k, _ in rows if "ccl" in k)
    assert str(ref["ccl"]).startswith(f"file://{claims}/")
    resolved = {p for p, k, _ in events if k["t"] == 3 and list(k) == ["ts", "t"]}
    assert resolved == {0, 1, 2}
