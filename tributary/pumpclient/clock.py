"""Time for the client's retry and probe logic, injectable for tests.

Invariant: ``now()`` is monotonic seconds; ``sleep()`` suspends for at least
the given time on this clock."""

from __future__ import annotations

import asyncio
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
