"""A scripted TiDB status server: a real aiohttp server on 127.0.0.1 serving recorded DDL job JSON
at ``/ddl/history`` the way TiDB's ``DDLHistoryJobHandler`` does: ``start_job_id`` + ``limit``
give jobs with id <= start, newest first; ``limit`` alone the newest; nothing at all every job;
bad parameters HTTP 400 with a text message. A ``legacy`` peer ignores ``start_job_id`` as TiDB
before v6.2 did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

Doc = dict[str, Any]


class ScriptedTidb:
    def __init__(self, jobs: list[Doc], *, legacy: bool = False) -> None:
        self.jobs = sorted(jobs, key=lambda j: int(j["id"]))
        self.legacy = legacy
        self.queries: list[dict[str, str]] = []
        self.answer: Callable[[], web.Response] | None = None  # replaces the normal answer

    async def history(self, request: web.Request) -> web.Response:
        self.queries.append(dict(request.query))
        if self.answer is not None:
            return self.answer()
        try:
            start = int(request.query.get("start_job_id", "0"))
            limit = int(request.query.get("limit", "0"))
        except ValueError as e:
            return web.Response(status=400, text=str(e))
        if start < 0 or not 0 <= limit <= 2048:
            return web.Response(status=400, text="ddl history limit must be greater than 0")
        if self.legacy:
            start = 0
            jobs = self.jobs[-limit:] if limit else self.jobs
        elif start == 0 and limit == 0:
            jobs = self.jobs
        elif start and not limit:
            text = "when 'start_job_id' is specified, it must work with a 'limit'"
            return web.Response(status=400, text=text)
        else:
            newest_first = [j for j in reversed(self.jobs) if not start or j["id"] <= start]
            jobs = newest_first[:limit]
        return web.json_response(jobs or None)


@asynccontextmanager
async def serving(tidb: ScriptedTidb) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/ddl/history", tidb.history)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()
