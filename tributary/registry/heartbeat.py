"""A node's heartbeat: rewrite its status record every interval.

Pumps beat every 2 s (``heartbeat-interval``), drainers every 1 s. Like the Go
drainer, a node that fails ``max_failures`` beats in a row gives up: the
heartbeat raises ``HeartbeatError`` so the owning service goes down and is
restarted, instead of running on while the registry shows stale data.

Invariant: writes never overlap, and each one carries the status computed
right before it, so a forced beat (``beat_now``, on a state change) can never be
overwritten by an older periodic one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType

from tributary.coord.kv import KvError
from tributary.registry.registry import NodeRegistry, RegistryError
from tributary.registry.status import NodeKind, NodeStatus

log = logging.getLogger(__name__)

StatusFn = Callable[[], NodeStatus | Awaitable[NodeStatus]]
Sleep = Callable[[float], Awaitable[None]]

DEFAULT_MAX_FAILURES = 20


class HeartbeatError(RegistryError):
    """Too many consecutive heartbeat failures: the node must stop."""


class Heartbeat:
    """Use as ``async with Heartbeat(...) as hb:`` (runs a task named
    ``heartbeat-<kind>`` until the block exits; a HeartbeatError raised by it
    cancels the block and comes out of the ``async with``), or run ``run()``
    in the service's own TaskGroup. ``on_written`` is called after each successful write."""

    def __init__(
        self,
        registry: NodeRegistry,
        kind: NodeKind,
        status_fn: StatusFn,
        interval: float,
        *,
        max_failures: int = DEFAULT_MAX_FAILURES,
        sleep: Sleep = asyncio.sleep,
        on_written: Callable[[NodeStatus], None] | None = None,
    ) -> None:
        if interval <= 0 or max_failures < 1:
            raise ValueError("heartbeat needs interval > 0 and max_failures >= 1")
        self._registry = registry
        self._kind = kind
        self._status_fn = status_fn
        self._interval = interval
        self._max_failures = max_failures
        self._sleep = sleep
        self._on_written = on_written
        self._lock = asyncio.Lock()
        self._group: asyncio.TaskGroup | None = None
        self._task: asyncio.Task[None] | None = None
        self.failures = 0  # consecutive failed periodic beats
        self.total_failures = 0
        self.beats = 0  # successful writes

    async def beat_now(self) -> NodeStatus:
        """Compute and write the status now; returns what was written.

        Raises the store's KvError to the caller (not counted as a periodic failure).
        """
        async with self._lock:
            status = self._status_fn()
            if inspect.isawaitable(status):
                status = await status
            await self._registry.update(self._kind, status)
            self.failures = 0
            self.beats += 1
            if self._on_written is not None:
                self._on_written(status)
            return status

    async def run(self) -> None:
        """Beat now and then every interval, forever; raises HeartbeatError after
        ``max_failures`` consecutive failures."""
        while True:
            try:
                await self.beat_now()
            except KvError as e:
                self.failures += 1
                self.total_failures += 1
                log.warning(
                    "heartbeat of %s failed (%d in a row, limit %d): %s",
                    self._kind.value,
                    self.failures,
                    self._max_failures,
                    e,
                )
                if self.failures >= self._max_failures:
                    raise HeartbeatError(
                        f"{self._kind.value} heartbeat failed {self.failures} times in a row"
                    ) from e
            await self._sleep(self._interval)

    async def __aenter__(self) -> Heartbeat:
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        self._task = group.create_task(self.run(), name=f"heartbeat-{self._kind.value}")
        return self

    async def __aexit__(
        self,
        et: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._group is not None and self._task is not None
        self._task.cancel()
        try:
            await self._group.__aexit__(et, exc, tb)
            return
        except BaseExceptionGroup as group:
            if len(group.exceptions) != 1:
                raise
            sole = group.exceptions[0]
        # One error (the heartbeat's, or the block's own): raise it as itself.
        raise sole
