"""What an operator sees of a changefeed, against a real capture, etcd and MariaDB upstream:
the checkpoint keeps moving while the upstream is idle (past a ts taken after the last write),
``/status`` and ``/synced`` answer with TiCDC's fields, ``cdc cli`` takes ``--server`` after the
command and has ``processor list|query`` and ``changefeed statistics``, and ``/metrics`` exports
``ticdc_owner_checkpoint_ts_lag`` and the processor metrics with TiCDC's labels."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.capture import ROOT, capture_cli, start_capture, write_shop
from tests.support.etcd import EtcdProcess
from tributary.wire.ts import from_seconds

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(240)

FEED = "cf-watch"


async def api(port: int, path: str) -> Any:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s,
        s.get(f"http://127.0.0.1:{port}{path}") as r,
    ):
        assert r.status == 200, await r.text()
        return await r.json()


async def samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s,
        s.get(f"http://127.0.0.1:{port}/metrics") as r,
    ):
        text = await r.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def rows(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM shop__items").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


async def until(what: str, check: Any, within: float = 60) -> Any:
    try:
        async with asyncio.timeout(within):
            while True:
                value = await check()
                if value:
                    return value
                await asyncio.sleep(0.3)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def cli(port: int, *args: str) -> list[Any]:
    """``binlog-cdc cli`` with ``--server`` after the command, as TiCDC's users write it."""
    out = subprocess.run(
        [sys.executable, "-m", "services.capture", "cli", *args, "--server", f"127.0.0.1:{port}"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr.decode()
    decoder, text, objects = json.JSONDecoder(), out.stdout.decode().strip(), []
    while text:
        obj, end = decoder.raw_decode(text)
        objects.append(obj)
        text = text[end:].strip()
    return objects


async def test_an_idle_changefeed_keeps_moving_and_is_observable(
    tmp_path: Path, etcd: EtcdProcess, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = tmp_path / "down.db"
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4301", tmp_path / "c.log")
    try:
        await capture_cli(
            port, "changefeed", "create", "-c", FEED, "--sink-uri", f"sqlite://{down}"
        )
        await up.execute("CREATE DATABASE shop")
        await up.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(32))")
        await write_shop(up, [f"INSERT INTO items VALUES ({i}, 'item {i}')" for i in range(5)])
        await write_shop(up, ["INSERT INTO items VALUES (5, 'last')"])
        after = from_seconds(time.time())  # the last write has committed upstream

        async def applied() -> bool:
            return rows(down) == 6

        await until("the rows downstream", applied)

        # 1. Nothing is written any more, yet the checkpoint passes a ts taken after the write.
        async def moved_on() -> Any:
            status = await api(port, f"/api/v2/changefeeds/{FEED}/status")
            return status if status["checkpoint_ts"] > after else None

        status = await until("the idle checkpoint to pass the last write", moved_on)
        assert status["state"] == "normal"
        assert status["resolved_ts"] >= status["checkpoint_ts"]
        assert status["last_error"] is None and status["last_warning"] is None
        assert rows(down) == 6

        # 2. TiCDC's /synced fields; written 6 rows moments ago: not synced yet (300 s quiet).
        synced = await api(port, f"/api/v2/changefeeds/{FEED}/synced")
        assert set(synced) == {
            "synced",
            "sink_checkpoint_ts",
            "puller_resolved_ts",
            "last_synced_ts",
            "now_ts",
            "info",
        }
        assert synced["synced"] is False and synced["last_synced_ts"]
        assert len(synced["sink_checkpoint_ts"]) == len("2024-05-01 12:00:00.000")

        # 3. The CLI: processors, and statistics, with --server after the command.
        [listed] = cli(port, "processor", "list")
        mine = {"changefeed_id": FEED, "namespace": "default", "capture_id": "c0"}
        assert {**mine, "table_ids": ["*"]} in listed["items"]  # a whole changefeed
        [detail] = cli(port, "processor", "query", "-c", FEED, "-p", "c0")
        assert detail["table_ids"] == ["*"] and detail["count"] == 6
        assert detail["checkpoint_ts"] > 0 and detail["error"] is None
        stats = cli(
            port, "changefeed", "statistics", "-c", FEED, "--interval", "0.5", "--iterations", "2"
        )
        assert len(stats) == 2
        assert all(set(s) == {"ops", "count", "sink_gap", "replication_gap"} for s in stats)
        assert stats[-1]["count"] == 6 and stats[-1]["ops"] == 0

        # 4. Metrics with TiCDC's names and labels, from the running capture (owner and
        #    processor); the owner's checkpoint passes the last write too.
        labels = (("changefeed", FEED), ("namespace", "default"))

        async def exported() -> Any:
            got = await samples(port)
            ckpt = got.get(("ticdc_owner_checkpoint_ts", labels), 0)
            return got if ckpt > after else None

        got = await until("the owner's metrics", exported)
        for name in (
            "ticdc_owner_checkpoint_ts_lag",
            "ticdc_owner_resolved_ts",
            "ticdc_owner_resolved_ts_lag",
            "ticdc_owner_status",
            "ticdc_processor_checkpoint_ts",
            "ticdc_processor_checkpoint_ts_lag",
            "ticdc_processor_resolved_ts",
            "ticdc_processor_resolved_ts_lag",
            "ticdc_processor_exit_with_error_count",
        ):
            assert (name, labels) in got, name
        assert got[("ticdc_owner_status", labels)] == 0  # normal
        assert got[("ticdc_processor_applied_rows", labels)] == 6
        assert got[("ticdc_owner_ownership", ())] == 1
        info = tuple(sorted((*labels, ("protocol", ""), ("scheme", "sqlite"))))
        assert got[("ticdc_processor_sink_info", info)] == 1
    finally:
        capture.terminate()
        capture.wait(timeout=30)
