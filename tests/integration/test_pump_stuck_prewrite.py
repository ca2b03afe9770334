"""A prewrite whose commit does not come within max-txn-timeout, on a real pump over gRPC.

Default (``stuck-prewrite-action = "wait"``): the pump keeps it and says so loudly (an ERROR log
naming the start ts, the ``binlog_pump_storage_stuck_prewrites`` gauge, ``/status``, the etcd
record ``binlogctl pumps`` reads); when the commit comes late, the transaction is pulled (nothing
lost). ``"rollback"`` keeps the behaviour before: the prewrite is rolled back and counted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.stubs import commit, prewrite, pull, pump_stub, write
from tributary.config.pump import StorageConfig
from tributary.wire import ts

SHORT = StorageConfig(stop_write_at_available_space=1 << 20, max_txn_timeout=1.0)


async def get(url: str) -> tuple[str, object]:
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        text = await r.text()
        return text, (await r.json() if r.content_type == "application/json" else None)


async def test_a_stuck_prewrite_waits_alerts_and_its_late_commit_replicates(
    tmp_path: Path, etcd: EtcdProcess, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = pump_config(tmp_path / "p", etcd.endpoint, storage=SHORT, heartbeat_interval=0.2)
    start = ts.from_seconds(time.time() - 5)  # 5 s old: past the 1 s timeout at once
    async with running_pump(cfg) as p:
        cid = p.started.cluster_id
        async with pump_stub(p.addr) as stub:
            with caplog.at_level(logging.ERROR, logger="services.pump"):
                await write(stub, cid, prewrite(start, b"row"))
                async with asyncio.timeout(30):
                    while True:
                        _, doc = await get(f"{p.http}/status")
                        assert isinstance(doc, dict)
                        node = doc["status"].get(p.started.node_id, {})
                        if doc["StuckPrewrites"] and node.get("stuckPrewrites"):
                            break
                        await asyncio.sleep(0.2)
            assert doc["StuckPrewrites"] == [start] and node["stuckPrewrites"] == [start]
            assert str(start) in doc["ErrMsg"]
            assert any(
                r.levelno == logging.ERROR and str(start) in r.getMessage() for r in caplog.records
            )
            metrics, _ = await get(f"{p.http}/metrics")
            assert "binlog_pump_storage_stuck_prewrites 1.0" in metrics
            assert f"binlog_pump_storage_oldest_stuck_prewrite_start_ts {float(start)}" in metrics
            ctl = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "services.binlogctl", "-pd-urls", etcd.endpoint,
                 "-cmd", "pumps"],
                capture_output=True,
                text=True,
                timeout=60,
            )  # fmt: skip
            assert ctl.returncode == 0, ctl.stderr
            assert f"{p.started.node_id}: 1 prewrites stuck past max-txn-timeout" in ctl.stdout
            assert str(start) in ctl.stdout

            # The commit arrives late: the transaction replicates, the alert clears.
            await write(stub, cid, commit(start, start + 1))
            [got] = await pull(stub, cid, 0, 1)
            assert (got.start_ts, got.commit_ts) == (start, start + 1)
            async with asyncio.timeout(30):
                while True:
                    _, doc = await get(f"{p.http}/status")
                    assert isinstance(doc, dict)
                    if not doc["StuckPrewrites"]:
                        break
                    await asyncio.sleep(0.2)
            metrics, _ = await get(f"{p.http}/metrics")
            assert "binlog_pump_storage_stuck_prewrites 0.0" in metrics


async def test_rollback_action_rolls_a_stuck_prewrite_back_as_before(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    storage = dataclasses.replace(SHORT, stuck_prewrite_action="rollback")
    cfg = pump_config(tmp_path / "p", etcd.endpoint, storage=storage)
    old = ts.from_seconds(time.time() - 5)
    async with running_pump(cfg) as p:
        cid = p.started.cluster_id
        async with pump_stub(p.addr) as stub:
            await write(stub, cid, prewrite(old, b"lost"))
            later = ts.from_seconds(time.time())
            await write(stub, cid, prewrite(later, b"kept"))
            await write(stub, cid, commit(later, later + 1))
            [got] = await pull(stub, cid, 0, 1)  # released once the old one is rolled back
            assert got.start_ts == later
            metrics, _ = await get(f"{p.http}/metrics")
            assert 'binlog_pump_storage_query_tikv_count{outcome="rolled_back"} 1.0' in metrics
