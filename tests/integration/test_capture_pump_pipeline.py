"""MariaDB -> capture -> ``pump://`` -> pumps -> drainer -> MariaDB, for real.

Everything is a real process or server: an upstream MariaDB with a ROW binlog (FULL row
metadata), a ``binlog-cdc server`` running one changefeed whose sink is the pump cluster, etcd
and two pumps, a drainer into a downstream MariaDB. The upstream sees DDL (CREATE, ALTER ADD
COLUMN), multi-row transactions with inserts, updates of non-key and key columns, deletes, and
a table without a primary key; the downstream ends equal (``checker.compare``). The capture is
then killed with SIGKILL and restarted while the upstream keeps changing: the changefeed
resumes from its checkpoint and the downstream is equal again. Before the kill, the capture's
``/metrics`` shows its pump client's acknowledged prewrites.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import asyncmy.errors
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.capture import capture_cli, start_capture, write_shop
from tests.support.pipeline import running_pipeline
from tributary.checker.compare import compare
from tributary.checker.errors import CheckerError

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(300)]


async def converged(up: MariaDBServer, down: MariaDBServer, expect: dict[str, int]) -> None:
    """Wait until every table of ``shop`` is equal and holds the expected row counts."""
    last = "nothing compared yet"
    try:
        async with asyncio.timeout(120):
            while True:
                try:
                    report = await compare(up.dsn("shop"), down.dsn("shop"))
                    last = report.render_text()
                    if not report.equal:
                        await asyncio.sleep(0.5)
                        continue
                    counts = {
                        t: (await down.query(f"SELECT COUNT(*) FROM shop.{t}"))[0][0]
                        for t in expect
                    }
                    last = f"equal, but counts {counts}"
                    if counts == expect:
                        return
                except (CheckerError, asyncmy.errors.ProgrammingError) as e:  # no schema yet
                    last = str(e)
                await asyncio.sleep(0.5)
    except TimeoutError:
        raise AssertionError(f"downstream did not converge: {last}") from None


async def pump_client_count(port: int, kind: str, changefeed: str) -> float:
    """The capture's ``ticdc_sink_pump_client_events_total{changefeed,type=kind}``, as
    scraped."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as r,
    ):
        r.raise_for_status()
        text = await r.text()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "ticdc_sink_pump_client_events_total" and s.labels["type"] == kind:
                assert s.labels["namespace"] == "default"
                if s.labels["changefeed"] == changefeed:
                    return s.value
    raise AssertionError(f"no pump client counter {kind!r} in the capture's /metrics")


async def test_mariadb_through_capture_pumps_and_drainer(
    tmp_path: Path, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    (tmp_path / "cluster").mkdir()
    async with running_pipeline(tmp_path / "cluster", pumps=2) as pipe:
        assert pipe.cluster.etcd is not None
        etcd = pipe.cluster.etcd.url
        await pipe.cluster.start_drainer(f"{down.dsn()}?consistent=true")
        capture, port = start_capture(etcd, up.dsn() + "?server-id=4343", tmp_path / "cdc.log")
        try:
            host_port = etcd.removeprefix("http://")
            await capture_cli(
                port,
                "changefeed",
                "create",
                "-c",
                "to-pumps",
                "--sink-uri",
                f"pump://{host_port}/?name=to-pumps",
            )
            await up.execute("CREATE DATABASE shop")
            await up.execute(
                "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(32),"
                " price DECIMAL(10,2), at DATETIME(3), tags SET('a','b','c'))"
            )
            await up.execute("CREATE TABLE shop.events (kind VARCHAR(16), n BIGINT UNSIGNED)")
            for i in range(0, 60, 6):
                await write_shop(
                    up,
                    [
                        f"INSERT INTO items VALUES ({j}, 'item {j}', {j}.25,"
                        f" '2026-11-21 10:00:00.{j:03d}', 'a,c')"
                        for j in range(i, i + 6)
                    ]
                    + [f"INSERT INTO events VALUES ('made', {2**64 - 1 - i})"],
                )
            await write_shop(
                up,
                [
                    "UPDATE items SET price = price * 2 WHERE id < 10",
                    "UPDATE items SET id = id + 1000 WHERE id = 59",  # a key change
                    "DELETE FROM items WHERE id BETWEEN 20 AND 29",
                    "UPDATE events SET kind = 'seen' WHERE n = 18446744073709551615",
                    "DELETE FROM events WHERE kind = 'made' AND n < 18446744073709551600",
                ],
            )
            await up.execute("ALTER TABLE shop.items ADD COLUMN note VARCHAR(40) DEFAULT 'new'")
            await write_shop(up, ["INSERT INTO items (id, name) VALUES (500, 'after alter')"])
            await write_shop(up, ["UPDATE items SET note = 'changed' WHERE id = 1"])
            await converged(up, down, {"items": 51, "events": 3})
            # 10 + 1 + 1 + 1 transactions and the ALTER, each a prewrite the pumps acknowledged
            assert await pump_client_count(port, "prewrites_ok", "to-pumps") >= 14

            capture.kill()  # SIGKILL mid-life; the upstream keeps changing meanwhile
            capture.wait()
            await write_shop(up, [f"INSERT INTO items (id) VALUES ({k})" for k in range(600, 620)])
            await write_shop(up, ["DELETE FROM items WHERE id < 5"])
            capture, port = start_capture(etcd, up.dsn() + "?server-id=4343", tmp_path / "cdc.log")
            await converged(up, down, {"items": 66, "events": 3})
        finally:
            capture.kill()
            capture.wait()
