"""Watching the drainer from outside, over its HTTP API, as an operator would.

``GET /commit_ts`` gives the saved checkpoint (tidb-binlog's ``{"data": {"ts": ...}}``) and
``GET /metrics`` the applied count. :meth:`DrainerWatch.wait_past` polls the checkpoint until
it reaches a commit ts, for a bounded time.

Invariant: a drainer that does not answer is "unknown" (None), never an error, while it runs;
one whose process has ended stops the wait at once (``alive`` raises).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from services.demo.progress import DrainerSample, parse_applied

log = logging.getLogger(__name__)

POLL = 0.2  # seconds between two looks while waiting


@dataclass(frozen=True, slots=True)
class CatchUp:
    reached: bool
    waited: float  # seconds
    checkpoint_ts: int | None  # the last one seen


class DrainerWatch:
    def __init__(
        self,
        http: aiohttp.ClientSession,
        status_url: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http
        self._url = status_url
        self._clock = clock

    async def checkpoint(self) -> int | None:
        body = await self._get("/commit_ts", json=True)
        try:
            return int(body["data"]["ts"]) if body is not None else None
        except (KeyError, TypeError, ValueError):
            log.warning("unexpected /commit_ts answer: %r", body)
            return None

    async def applied(self) -> int | None:
        text = await self._get("/metrics", json=False)
        return None if text is None else parse_applied(text)

    async def sample(self) -> DrainerSample:
        checkpoint, applied = await asyncio.gather(self.checkpoint(), self.applied())
        return DrainerSample(checkpoint, applied)

    async def wait_past(self, ts: int, within: float, alive: Callable[[], None]) -> CatchUp:
        """Poll until the checkpoint is at least ``ts`` or ``within`` seconds passed;
        ``alive`` raises if the drainer's process has gone."""
        began = self._clock()
        last: int | None = None
        while True:
            alive()
            last = await self.checkpoint() or last
            waited = self._clock() - began
            if last is not None and last >= ts:
                return CatchUp(True, waited, last)
            if waited >= within:
                return CatchUp(False, waited, last)
            await asyncio.sleep(POLL)

    async def _get(self, path: str, *, json: bool) -> Any:
        try:
            async with self._http.get(f"{self._url}{path}") as resp:
                if resp.status != 200:
                    return None
                return await resp.json() if json else await resp.text()
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            log.debug("GET %s%s: %r", self._url, path, e)
            return None
