"""Coalescing concurrent timestamp requests: the batching half of the TSO clients.

``TimestampBatcher`` is shared by ``TsoClient`` (our ``binlogext.Tso``) and ``PdClient``
(PD's ``Tso`` stream); each gives it its own request function. Callers wait in arrival
order, each with a deadline. One flush task takes up to MAX_COUNT live waiters and asks
for that many timestamps in one request (one request in flight; callers arriving during
it form the next batch). A request that raises ``Retry`` is tried again with backoff: the
waiters whose deadline passed fail, newcomers top the batch up. A ``TsoError`` fails the
whole batch; the flusher keeps serving the next one.

Invariant: a batch's callers get the consecutive timestamps ending at the one the request
returned, in arrival order.

Example: three callers wait, the request for ``count = 3`` returns 107; they get 105, 106
and 107 in the order they called.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType

from tributary.tso.allocator import MAX_COUNT
from tributary.tso.errors import TsoError

# (count, earliest deadline of the batch) -> the last of ``count`` consecutive timestamps
Request = Callable[[int, float], Awaitable[int]]


class Retry(Exception):
    """One attempt failed in a way another attempt (perhaps elsewhere, or later) may fix."""


@dataclass(frozen=True, slots=True)
class BatchTexts:
    """What a client's callers read when their timestamp does not come."""

    expired: str  # prefix of the error when a request kept failing past the deadline
    timed_out: str  # the error when the caller's own wait ran out
    closed: str  # the error for the waiters still pending when the client closes


@dataclass(slots=True)
class _Waiter:
    deadline: float
    future: asyncio.Future[int]


class TimestampBatcher:
    """Batches ``get(deadline)`` calls into ``request(count, deadline)``. Async context manager.

    ``on_error`` (optional) runs before the batch's waiters are told about a failed
    request, e.g. to drop a broken stream.
    """

    def __init__(
        self,
        request: Request,
        texts: BatchTexts,
        *,
        task_name: str,
        on_error: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._request = request
        self._texts = texts
        self._task_name = task_name
        self._on_error = on_error
        self._pending: list[_Waiter] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    async def __aenter__(self) -> TimestampBatcher:
        self._task = asyncio.create_task(self._flush_loop(), name=self._task_name)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for w in self._pending:
            if not w.future.done():
                w.future.set_exception(TsoError(self._texts.closed, retriable=True))
        self._pending.clear()

    async def get(self, deadline: float) -> int:
        """The caller's timestamp; TsoError(retriable=True) when none comes by ``deadline``."""
        waiter = _Waiter(deadline, asyncio.get_running_loop().create_future())
        self._pending.append(waiter)
        self._wakeup.set()
        try:
            async with asyncio.timeout_at(deadline + 1.0):  # the flusher fails it first
                return await waiter.future
        except TimeoutError as e:
            raise TsoError(self._texts.timed_out, retriable=True) from e

    async def _flush_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch = self._take_pending([])
            if batch:
                await self._serve(batch)

    def _take_pending(self, batch: list[_Waiter]) -> list[_Waiter]:
        """Append live pending waiters to ``batch`` up to MAX_COUNT; the rest wait."""
        live = [w for w in batch + self._pending if not w.future.done()]
        batch, self._pending = live[:MAX_COUNT], live[MAX_COUNT:]
        if self._pending:
            self._wakeup.set()
        return batch

    async def _serve(self, batch: list[_Waiter]) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.05
        while batch:
            try:
                last = await self._request(len(batch), min(w.deadline for w in batch))
            except Retry as e:
                await self._failed()
                now = loop.time()
                for w in batch:
                    if w.deadline <= now and not w.future.done():
                        w.future.set_exception(
                            TsoError(f"{self._texts.expired}: {e}", retriable=True)
                        )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                batch = self._take_pending(batch)
                continue
            except TsoError as e:
                await self._failed()
                for w in batch:
                    if not w.future.done():
                        w.future.set_exception(e)
                return
            first = last - len(batch) + 1
            for offset, w in enumerate(batch):
                if not w.future.done():
                    w.future.set_result(first + offset)
            return

    async def _failed(self) -> None:
        if self._on_error is not None:
            await self._on_error()
