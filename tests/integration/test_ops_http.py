"""The ops HTTP server over real loopback sockets: built-in endpoints, routes, errors, shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tributary.telemetry import Metrics
from tributary.telemetry.http import ApiError, OpsServer, json_response, read_json


class State:
    def __init__(self) -> None:
        self.ready = False
        self.paused: list[str] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()


def service_routes(state: State) -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.put("/state/{node_id}/{action}")
    async def change_state(request: web.Request) -> web.Response:
        action = request.match_info["action"]
        if action not in ("pause", "close"):
            raise ApiError(400, f"unknown action {action!r}", allowed=["pause", "close"])
        state.paused.append(request.match_info["node_id"])
        return json_response({"node": request.match_info["node_id"], "action": action})

    @routes.post("/echo")
    async def echo(request: web.Request) -> web.Response:
        return json_response({"got": await read_json(request)})

    @routes.get("/boom")
    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("index is corrupt")

    @routes.get("/slow")
    async def slow(request: web.Request) -> web.Response:
        state.entered.set()
        await state.release.wait()
        return json_response({"done": True})

    return routes


@pytest.fixture
async def served() -> AsyncIterator[tuple[OpsServer, State, aiohttp.ClientSession]]:
    state = State()
    metrics = Metrics()
    metrics.exact_counter("binlog_pump_storage_error_count", "errors", ["type"]).labels(
        type="write"
    ).inc(3)
    extra = [web.get("/drainers", _no_drainers)]
    server = OpsServer(
        "127.0.0.1", 0, [*service_routes(state), *extra], metrics.registry, lambda: state.ready
    )
    async with server, aiohttp.ClientSession(base_url=server.url) as session:
        yield server, state, session


async def _no_drainers(request: web.Request) -> web.Response:
    return json_response([])


async def test_binds_an_ephemeral_port_and_serves_health(
    served: tuple[OpsServer, State, aiohttp.ClientSession],
) -> None:
    server, _, session = served
    assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
    async with session.get("/health") as r:
        assert (r.status, await r.json()) == (200, {"status": "ok"})


async def test_ready_follows_ready_fn(
    served: tuple[OpsServer, State, aiohttp.ClientSession],
) -> None:
    _, state, session = served
    async with session.get("/ready") as r:
        assert (r.status, await r.json()) == (503, {"ready": False})
    state.ready = True
    async with session.get("/ready") as r:
        assert (r.status, await r.json()) == (200, {"ready": True})


async def test_ready_fn_failure_is_not_ready(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> bool:
        raise KeyError("no storage yet")

    async with OpsServer("127.0.0.1", 0, ready_fn=broken) as server:
        async with aiohttp.ClientSession() as s, s.get(f"{server.url}/ready") as r:
            body = await r.json()
    assert r.status == 503 and body["ready"] is False and "no storage yet" in body["error"]
    assert "readiness check failed" in caplog.text


async def test_metrics_from_the_service_registry(
    served: tuple[OpsServer, State, aiohttp.ClientSession],
) -> None:
    _, _, session = served
    async with session.get("/metrics") as r:
        text = await r.text()
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert 'binlog_pump_storage_error_count{type="write"} 3.0' in text


async def test_service_routes_and_json_helpers(
    served: tuple[OpsServer, State, aiohttp.ClientSession],
) -> None:
    _, state, session = served
    async with session.put("/state/pump-1/pause") as r:
        assert (r.status, await r.json()) == (200, {"node": "pump-1", "action": "pause"})
    assert state.paused == ["pump-1"]
    async with session.post("/echo", json={"ts": 42}) as r:
        assert await r.json() == {"got": {"ts": 42}}
    async with session.get("/drainers") as r:
        assert await r.json() == []


async def test_errors_are_json(
    served: tuple[OpsServer, State, aiohttp.ClientSession], caplog: pytest.LogCaptureFixture
) -> None:
    _, state, session = served
    async with session.put("/state/pump-1/stop") as r:
        assert r.status == 400
        assert await r.json() == {
            "error": "unknown action 'stop'",
            "status": 400,
            "allowed": ["pause", "close"],
        }
    assert state.paused == []
    async with session.post("/echo", data=b"{not json") as r:
        body = await r.json()
        assert r.status == 400 and body["error"].startswith("request body is not valid JSON")
    async with session.get("/nowhere") as r:
        assert (r.status, await r.json()) == (404, {"error": "Not Found", "status": 404})
    async with session.delete("/health") as r:
        assert r.status == 405 and "GET" in r.headers["Allow"]
        assert (await r.json())["error"] == "Method Not Allowed"
    with caplog.at_level(logging.ERROR, logger="tributary.telemetry.http"):
        async with session.get("/boom") as r:
            body = await r.json()
    assert r.status == 500
    assert body["error"] == "internal error: RuntimeError: index is corrupt"
    assert "GET /boom failed" in caplog.text and "Traceback" in caplog.text


async def test_graceful_shutdown_finishes_in_flight_requests() -> None:
    state = State()
    server = OpsServer("127.0.0.1", 0, service_routes(state))
    port = await server.start()
    async with aiohttp.ClientSession() as session:

        async def slow_call() -> tuple[int, object]:
            async with session.get(f"http://127.0.0.1:{port}/slow") as r:
                return r.status, await r.json()

        in_flight = asyncio.create_task(slow_call(), name="slow-request")
        await asyncio.wait_for(state.entered.wait(), 30)
        closing = asyncio.create_task(server.close(), name="ops-close")
        await asyncio.wait_for(_until_refused(port), 30)  # no longer accepting
        assert not in_flight.done()
        state.release.set()
        assert await asyncio.wait_for(in_flight, 30) == (200, {"done": True})
        await asyncio.wait_for(closing, 30)
    await server.close()  # idempotent


async def _until_refused(port: int) -> None:
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except ConnectionRefusedError:
            return
        writer.close()
        await writer.wait_closed()
        await asyncio.sleep(0.01)


async def test_a_taken_port_fails_start_cleanly() -> None:
    async with OpsServer("127.0.0.1", 0) as first:
        second = OpsServer("127.0.0.1", first.port)
        with pytest.raises(OSError):
            await second.start()
        await second.close()
