"""The status page's collector asks a tidb-binlog pump registered beside ours: its record says
``isAlive`` false (as every Go pump's does after its first heartbeat), and its HTTP API (a
stand-in answering ``/status`` and ``/metrics`` on 127.0.0.1 as the Go pump does) is still read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from services.status.collect import Collector
from tests.support.tidb_binlog_go import go_status_json
from tributary.coord.memory import MemoryKv
from tributary.registry.status import NodeKind, node_key

GO_METRICS = (
    "# TYPE binlog_pump_storage_storage_size_bytes gauge\n"
    'binlog_pump_storage_storage_size_bytes{type="available"} 2.5e+10\n'
    'binlog_pump_storage_storage_size_bytes{type="capacity"} 1e+11\n'
)


@asynccontextmanager
async def go_pump_http() -> AsyncIterator[str]:
    """A Go pump's HTTP API: ``GET /status`` and ``GET /metrics``; its address."""

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"status": {}, "CommitTS": 1, "Checkpoint": {}, "ErrMsg": ""})

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=GO_METRICS)

    app = web.Application()
    app.router.add_get("/status", status)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_go_pump_whose_record_says_not_alive_is_asked() -> None:
    kv = MemoryKv()
    async with go_pump_http() as addr, aiohttp.ClientSession() as http:
        record = go_status_json("pump-0:8250", addr, "online", 449_000_000_000_000_000, 1)
        await kv.put(node_key(NodeKind.PUMP, "pump-0:8250"), record)
        for n, state in ((1, "offline"), (2, "paused")):  # stopped: not asked
            stopped = go_status_json(f"pump-{n}:8250", "127.0.0.1:1", state, 1, 1)
            await kv.put(node_key(NodeKind.PUMP, f"pump-{n}:8250"), stopped)
        sample = await Collector(kv, http, timeout=10).sample()
    by_id = {p["id"]: p for p in sample["pumps"]}
    assert by_id["pump-0:8250"]["error"] == ""
    assert by_id["pump-0:8250"]["disk_available_bytes"] == 2.5e10
    assert by_id["pump-0:8250"]["alive"] is False  # shown as recorded
    for stopped in ("pump-1:8250", "pump-2:8250"):
        assert (by_id[stopped]["error"], by_id[stopped]["disk_available_bytes"]) == ("", None)
