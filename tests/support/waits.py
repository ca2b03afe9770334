"""Waiting for a condition, with a generous deadline, instead of sleeping or timing: the one way
tests wait."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def eventually(predicate: Callable[[], bool], within: float = 20.0) -> None:
    """Wait until ``predicate()`` holds, failing after ``within`` seconds. Polls:
    the conditions are plain attributes of the code under test."""
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def until(check: Callable[[], Awaitable[bool]], within: float = 30) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 (polls a remote state)
            await asyncio.sleep(0.05)
