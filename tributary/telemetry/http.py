"""The ops HTTP server every service runs: /metrics, /health, /ready plus service routes.

``GET /health`` answers 200 while the process serves; ``GET /ready`` 200 when ``ready_fn()`` is
true, else 503; ``GET /metrics`` the service's registry. Errors leave as JSON
``{"error": message, "status": code}``: handlers raise ``ApiError`` (or an aiohttp
``HTTPException``), anything else becomes a logged 500. With ``allowed_cns`` every request whose
verified client certificate has no allowed Common Name gets 403 before its handler runs.
It listens on its own address (``start``), serves connections accepted on another server's
port (``protocol_factory``, see ``telemetry.oneport``), or both. Invariant: ``start()`` returns
the bound port; ``close()`` stops accepting, lets in-flight
requests finish within ``shutdown_timeout`` seconds, and is idempotent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CollectorRegistry

from tributary.net import join_host_port
from tributary.telemetry.metrics import CONTENT_TYPE, render
from tributary.telemetry.tls import cn_allowed, common_names

log = logging.getLogger(__name__)

Routes = web.RouteTableDef | Iterable[web.AbstractRouteDef]


class ApiError(Exception):
    """Raised by a handler to answer ``status`` with a JSON error body."""

    def __init__(self, status: int, message: str, **details: object) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details


def json_response(data: object, *, status: int = 200) -> web.Response:
    body = json.dumps(data, ensure_ascii=False, default=str)
    return web.Response(text=body, status=status, content_type="application/json")


def error_response(status: int, message: str, **details: object) -> web.Response:
    return json_response({"error": message, "status": status, **details}, status=status)


async def read_json(request: web.Request) -> Any:
    """The request body parsed as JSON; a 400 ``ApiError`` when it is not valid JSON."""
    try:
        return json.loads(await request.read())
    except ValueError as e:
        raise ApiError(400, f"request body is not valid JSON: {e}") from e


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as e:
        return error_response(e.status, e.message, **e.details)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        response = error_response(e.status, _http_message(e))
        if "Allow" in e.headers:
            response.headers["Allow"] = e.headers["Allow"]
        return response
    except Exception as e:
        log.exception("%s %s failed", request.method, request.path)
        return error_response(500, f"internal error: {type(e).__name__}: {e}")


def _http_message(e: web.HTTPException) -> str:
    default = f"{e.status}: {e.reason}"
    return e.text if e.text and e.text != default else e.reason


def _cn_guard(allowed: frozenset[str]) -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        cert = request.transport.get_extra_info("peercert") if request.transport else None
        if not cn_allowed(cert, allowed):
            names = ", ".join(common_names(cert)) or "no client certificate"
            log.warning(
                "refused %s %s: certificate CN not allowed (%s)",
                request.method,
                request.path,
                names,
            )
            return error_response(403, f"client certificate CN not allowed ({names})")
        return await handler(request)

    return guard


class OpsServer:
    """aiohttp server for ops endpoints; an async context manager around ``start``/``close``."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: Routes = (),
        registry: CollectorRegistry | None = None,
        ready_fn: Callable[[], bool] = lambda: True,
        ssl_context: ssl.SSLContext | None = None,
        *,
        allowed_cns: Sequence[str] = (),
        shutdown_timeout: float = 5.0,
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry if registry is not None else CollectorRegistry()
        self._ready_fn = ready_fn
        self._ssl = ssl_context
        self._shutdown_timeout = shutdown_timeout
        middlewares: list[Middleware] = [_json_errors]
        if allowed_cns:
            middlewares.insert(0, _cn_guard(frozenset(allowed_cns)))
        self.app = web.Application(middlewares=middlewares)
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/ready", self._ready)
        self.app.router.add_get("/metrics", self._metrics)
        self.app.router.add_routes(routes)
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The bound port once started (the requested one before)."""
        return self._port

    @property
    def url(self) -> str:
        return f"{'https' if self._ssl else 'http'}://{join_host_port(self._host, self._port)}"

    async def start(self) -> int:
        """Bind and serve on this server's own host and port; returns the bound port."""
        fresh = self._runner is None
        runner = await self._setup()
        site = web.TCPSite(runner, self._host, self._port, ssl_context=self._ssl)
        try:
            await site.start()
        except BaseException:
            if fresh:
                await self.close()
            raise
        self._port = site.port
        log.info("ops HTTP server listening on %s", self.url)
        return self._port

    async def protocol_factory(self) -> Callable[[], asyncio.BaseProtocol]:
        """One aiohttp protocol per call, for connections accepted elsewhere (the gRPC port,
        ``telemetry.oneport``); ``close`` shuts those connections down too."""
        server = (await self._setup()).server
        assert server is not None
        return server

    async def _setup(self) -> web.AppRunner:
        if self._runner is None:
            runner = web.AppRunner(
                self.app, access_log=None, shutdown_timeout=self._shutdown_timeout
            )
            await runner.setup()
            self._runner = runner
        return self._runner

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> OpsServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _health(self, request: web.Request) -> web.Response:
        return json_response({"status": "ok"})

    async def _ready(self, request: web.Request) -> web.Response:
        try:
            ready = self._ready_fn()
        except Exception as e:
            log.exception("readiness check failed")
            return json_response({"ready": False, "error": f"{type(e).__name__}: {e}"}, status=503)
        return json_response({"ready": ready}, status=200 if ready else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=render(self._registry), headers={"Content-Type": CONTENT_TYPE})
