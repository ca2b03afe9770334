"""Fuzz targets for the HTTP APIs: the pump's, the drainer's and the capture's, in process.

An input is ``<method byte><path>\\n<body>``: the request goes through the service's real
``OpsServer`` application (its routes and its error middleware) without a socket. A path the
HTTP layer cannot even build a request from is refused there, before any handler. The contract
the target checks: every answer is a JSON response, and none is a 500 (an exception of ours
the middleware could only log). The state behind the routes (an in-memory etcd holding a
changefeed and two captures, a pump's stored binlog) is rebuilt after any input that changed
it, so each input meets the same state and a finding replays alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import streams, web
from aiohttp.http import HttpVersion11, RawRequestMessage
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from services.capture.feeds import CreateRequest, Feeds
from services.capture.http import routes as capture_routes
from services.drainer.http import routes as drainer_routes
from services.drainer.state import DrainerState
from services.pump.http import routes as pump_routes
from services.pump.state import PumpState
from tributary.cdc.keys import Keys
from tributary.cdc.model import CaptureInfo, ReplicaConfig
from tributary.coord.memory import MemoryKv
from tributary.errors import TributaryError
from tributary.registry.registry import NodeRegistry
from tributary.telemetry.http import OpsServer
from tributary.wire.binlog import Binlog, BinlogType

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD")


class ServerError(TributaryError):
    """Not raised by the product: the target's report of a 500 answer (a crash)."""


class _Source:
    """The upstream a capture asks for its position and tables when a changefeed is made."""

    async def current_position(self) -> str:
        return "mysql-bin.000001:4"

    async def tables(self, table_filter: object) -> list[tuple[str, str]]:
        return [("shop", "orders")]

    def reached(self, position: str, end: str) -> bool:
        return True

    def open(self, *args: object) -> Any:
        raise RuntimeError("a changefeed is not run here")


class _Storage:
    """What the pump's routes read of its storage."""

    def __init__(self) -> None:
        self.payload = bytes(Binlog(tp=BinlogType.Commit, start_ts=10, commit_ts=11))
        self.gc_ts = 0
        self.stats = type("Stats", (), {"stuck_prewrites": [9]})()

    async def get(self, ts: int) -> bytes | None:
        return self.payload if ts == 11 else None

    async def backlog(self, after: int) -> tuple[int, int]:
        return (1, 11) if after < 11 else (0, 11)


class _Writer:
    """The response writer a request carries; ``app._handle`` only drains it (on ``Expect``)."""

    async def drain(self) -> None:
        pass


class _Protocol:
    """The connection a request comes over: a loopback peer without TLS, and the flow control a
    body's stream asks of it, which never binds here. One plain object for every input (aiohttp's
    ``make_mocked_request`` builds a dozen ``Mock``s an input, ~90% of the target's time)."""

    _reading_paused = False
    transport = None
    ssl_context = None
    peername = ("127.0.0.1", 40000)
    sockname = ("127.0.0.1", 8250)
    max_field_size = max_line_length = 8190
    max_headers = 128
    writer = _Writer()

    def pause_reading(self, **_: object) -> None:
        pass

    def resume_reading(self, **_: object) -> None:
        pass


class _Harness:
    def __init__(
        self, build: Callable[[], Awaitable[tuple[web.Application, Callable[[], object]]]]
    ):
        self._build = build
        self._loop = asyncio.new_event_loop()
        self._app: web.Application | None = None
        self._mark: Callable[[], object] = lambda: None
        self._seen: object = None
        self._protocol: Any = _Protocol()

    def __call__(self, raw: bytes) -> None:
        self._loop.run_until_complete(self._one(raw))

    async def _one(self, raw: bytes) -> None:
        if self._app is None or self._mark() != self._seen:
            self._app, self._mark = await self._build()
            self._app.freeze()  # as a runner does: the middlewares run from here on
            self._seen = self._mark()
        method = METHODS[raw[0] % len(METHODS)] if raw else "GET"
        line, _, body = raw[1:].partition(b"\n")
        try:
            request = self._request(method, line.decode("latin-1"), body)
        except ValueError:
            return  # not a request line aiohttp's parser would have passed on
        response = await self._app._handle(request)
        if response.status >= 500 and response.status != 503:
            raise ServerError(f"{method} {request.path}: {response.status} {response.text!r}")
        if response.status != 405 and isinstance(response, web.Response) and response.text:
            json.loads(response.text)

    def _request(self, method: str, path: str, body: bytes) -> web.Request:
        """The request aiohttp's server would hand the app for this line and body (what
        ``make_mocked_request`` builds, with plain objects for the connection)."""
        payload = streams.StreamReader(self._protocol, 2**16, loop=self._loop)
        payload.feed_data(body)
        payload.feed_eof()
        raw = ((b"Content-Length", str(len(body)).encode()),) if body else ()
        headers = CIMultiDictProxy(CIMultiDict((k.decode(), v.decode()) for k, v in raw))
        path = path or "/"
        message = RawRequestMessage(
            method, path, HttpVersion11, headers, raw, False, None, False, False, URL(path)
        )
        protocol, task = self._protocol, asyncio.current_task()
        return web.Request(message, payload, protocol, protocol.writer, task, self._loop)  # type: ignore[arg-type]


async def _pump() -> tuple[web.Application, Callable[[], object]]:
    kv, state = MemoryKv(), PumpState()
    storage: Any = _Storage()

    async def gc() -> int:
        return 0

    r = pump_routes("pump-1", state, NodeRegistry(kv), storage, lambda: 11, gc)
    app = OpsServer("127.0.0.1", 0, r).app
    return app, lambda: (state.state, state.requested, kv.revision)


async def _drainer() -> tuple[web.Application, Callable[[], object]]:
    state = DrainerState()
    r = drainer_routes("drainer-1", state, lambda: {"pump-1": 11}, lambda: True, lambda: 11)
    return OpsServer("127.0.0.1", 0, r).app, lambda: state.state


async def _capture() -> tuple[web.Application, Callable[[], object]]:
    kv, keys = MemoryKv(), Keys("default")
    source: Any = _Source()
    feeds = Feeds(kv, keys, source)
    for capture in ("c1", "c2"):
        await kv.put(keys.capture_key(capture), CaptureInfo(capture, "127.0.0.1:8300").to_json())
    await feeds.create(CreateRequest("cf1", "blackhole://", "default", 0, 0, "", ReplicaConfig()))
    app = OpsServer("127.0.0.1", 0, capture_routes(feeds, "c1", "default", lambda: True)).app
    return app, lambda: kv.revision


pump_http = _Harness(_pump)
drainer_http = _Harness(_drainer)
capture_http = _Harness(_capture)

PUMP_SEEDS = [
    b"\x00/status\n",
    b"\x00/drainers\n",
    b"\x00/debug/binlog/11\n",
    b"\x00/backlog?after=5\n",
    b"\x01/debug/gc/trigger\n",
    b"\x02/state/pump-1/pause\n",
    b"\x00/metrics\n",
]
DRAINER_SEEDS = [
    b"\x00/status\n",
    b"\x00/commit_ts\n",
    b"\x02/catchup\n",
    b"\x02/state/drainer-1/close\n",
]
_CREATE = json.dumps(
    {
        "changefeed_id": "cf2",
        "sink_uri": "blackhole://",
        "start_ts": 5,
        "replica_config": {"filter": {"rules": ["shop.*"]}},
    }
).encode()
CAPTURE_SEEDS = [
    b"\x00/api/v2/changefeeds?namespace=default\n",
    b"\x00/api/v2/changefeeds/cf1\n",
    b"\x00/api/v2/changefeeds/cf1/status\n",
    b"\x00/api/v2/changefeeds/cf1/synced\n",
    b"\x01/api/v2/captures/c2/drain\n",
    b"\x00/api/v2/captures\n",
    b"\x00/api/v2/processors/cf1/c1\n",
    b"\x00/api/v2/health\n",
    b"\x01/api/v2/owner/resign\n",
    b"\x01/api/v2/changefeeds\n" + _CREATE,
    b'\x02/api/v2/changefeeds/cf1\n{"target_ts": 9, "config": {"case-sensitive": true}}',
    b'\x01/api/v2/changefeeds/cf1/resume\n{"overwrite_checkpoint_ts": 3}',
    b"\x01/api/v2/changefeeds/cf1/pause\n",
    b"\x03/api/v2/changefeeds/cf1\n",
]
