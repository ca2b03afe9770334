"""Client-side group commit for one pump: concurrent writes are coalesced into
one ``WriteBinlogs`` RPC.

Invariant: at most ``max_in_flight`` batches per pump are in flight (default
two); callers arriving while every slot is taken queue up and form the next
batch (capped by count and bytes, a single oversized payload travelling alone,
and split evenly over the free slots); every caller's future is resolved
exactly once, with its own errmsg or with the failure of its batch; a caller
still queued after ``queue_timeout`` is failed without being sent; once
:meth:`Batcher.stop` was called, :meth:`Batcher.run` ends and every caller
left gets an error, even if a batch in flight swallowed its cancellation.

More than one in flight: with one, the client and the pump take turns (the
client wakes the callers of an answered batch and marshals their next writes
while the pump idles, then the pump stores the batch while the client idles).
With two, the callers fall into two groups that alternate, so one group's
batch is stored while the other's is prepared. The order of batches on the
pump does not matter: a C-binlog is written only after its P-binlog was
acknowledged. Timed on the 2-core build machine with one in flight, a cycle of
512 binlogs was 15 ms of RPC (the front and the storage writer, one after the
other) and 7 ms of the client waking its callers and marshalling their next
writes, with about one core busy in all; with two, the client's part overlaps
the pump's, and the pump's CPU per binlog stayed the same.

grpclib turns the cancellation of a call whose channel is closed at the same
moment into ``StreamTerminatedError``, and it leaves ``Task.cancelling()``
raised after every deadline or lost connection, so neither the exception nor
that counter tells a stop from an ordinary failed RPC: the stop flag does.

Worked example (cap 3, one in flight): A arrives, the sender takes [A] and
sends it; B, C, D, E arrive during that RPC. When it returns, A is resolved
and the sender takes [B, C, D] (cap), then [E]. Five writes, three RPCs; with
a cap of 100 it would be two. With two in flight and a cap of 100: 8 callers
queued in one turn go as [4 callers] and [4 callers] at once; the callers of
the first, answered, queue their next writes while the second is stored.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tributary.pumpclient.errors import RpcFailure

log = logging.getLogger(__name__)

# Sends payloads as one RPC; returns one result per payload (None = stored).
SendBatch = Callable[[Sequence[bytes]], Awaitable[list[RpcFailure | None]]]

DEFAULT_MAX_COUNT = 512
DEFAULT_MAX_BYTES = 4 << 20
DEFAULT_IN_FLIGHT = 2


@dataclass(slots=True)
class _Item:
    payload: bytes
    future: asyncio.Future[RpcFailure | None]
    queued_at: float


class Batcher:
    """Feed with :meth:`submit`; :meth:`run` is the sender loop (one task)."""

    def __init__(
        self,
        send: SendBatch,
        *,
        max_count: int = DEFAULT_MAX_COUNT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_in_flight: int = DEFAULT_IN_FLIGHT,
        queue_timeout: float = float("inf"),
    ) -> None:
        if max_count < 1 or max_bytes < 1 or max_in_flight < 1:
            raise ValueError("batch caps must be positive")
        self._send = send
        self._max_count = max_count
        self._max_bytes = max_bytes
        self._max_in_flight = max_in_flight
        self._queue_timeout = queue_timeout
        self._queue: collections.deque[_Item] = collections.deque()
        self._in_flight: dict[int, list[_Item]] = {}
        self._batches = 0
        self._wakeup = asyncio.Event()
        self._closed = False
        self._running = False

    async def submit(self, payload: bytes) -> None:
        """Queue ``payload`` and wait until it is stored; raise its own failure,
        or its batch's (:class:`RpcFailure`, or whatever ``send`` raised)."""
        if self._closed:
            raise RpcFailure("pump connection closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RpcFailure | None] = loop.create_future()
        self._queue.append(_Item(payload, future, loop.time()))
        self._wakeup.set()
        failure = await future
        if failure is not None:
            raise failure

    def _take(self, now: float) -> list[_Item]:
        """The next batch: the queue's head, split evenly over the free slots."""
        free = self._max_in_flight - len(self._in_flight)
        cap = min(self._max_count, -(-len(self._queue) // free))
        expired = now - self._queue_timeout
        batch: list[_Item] = []
        size = 0
        while self._queue and len(batch) < cap:
            item = self._queue[0]
            if item.future.done():  # caller gave up before it was sent
                self._queue.popleft()
                continue
            if item.queued_at < expired:
                _fail(self._queue.popleft(), RpcFailure("deadline exceeded waiting for batch"))
                continue
            if batch and size + len(item.payload) > self._max_bytes:
                break
            batch.append(self._queue.popleft())
            size += len(item.payload)
        return batch

    def stop(self) -> None:
        """Refuse new writes and make :meth:`run` end after the batch in flight
        (cancel its task as well to abort that batch). Queued callers get an
        error at once if :meth:`run` is not running, else when it ends."""
        self._closed = True
        self._wakeup.set()
        if not self._running:
            self._fail_waiting()

    async def run(self) -> None:
        self._running = True
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.TaskGroup() as tg:
                while not self._closed:
                    if not self._queue or len(self._in_flight) >= self._max_in_flight:
                        self._wakeup.clear()
                        await self._wakeup.wait()
                        continue
                    batch = self._take(loop.time())
                    if batch:
                        self._batches += 1
                        n = self._batches
                        self._in_flight[n] = batch
                        tg.create_task(self._flush(n, batch), name=f"pumpclient-batch-{n}")
        finally:
            self._running = False
            self._closed = True
            self._fail_waiting()

    def _fail_waiting(self) -> None:
        for batch in self._in_flight.values():
            for item in batch:
                _fail(item, RpcFailure("pump connection closed mid-write", uncertain=True))
        self._in_flight.clear()
        while self._queue:
            _fail(self._queue.popleft(), RpcFailure("pump connection closed"))

    async def _flush(self, n: int, batch: list[_Item]) -> None:
        try:
            results = await self._send([item.payload for item in batch])
        except Exception as e:  # delivered to every caller of the batch
            for item in batch:
                _fail(item, e)
            return
        except BaseException:  # cancelled with the sender
            for item in batch:
                _fail(item, RpcFailure("pump connection closed mid-write", uncertain=True))
            raise
        finally:
            self._in_flight.pop(n, None)
            self._wakeup.set()  # a slot is free
        for item, result in zip(batch, results, strict=True):
            if not item.future.done():
                item.future.set_result(result)


def _fail(item: _Item, exc: Exception) -> None:
    if not item.future.done():
        # A fresh instance per caller, so tracebacks do not pile up on one object.
        item.future.set_exception(_copy(exc))


def _copy(exc: Exception) -> Exception:
    clone: Exception
    if isinstance(exc, RpcFailure):
        clone = RpcFailure(
            str(exc),
            retriable=exc.retriable,
            uncertain=exc.uncertain,
            reset=exc.reset,
            elsewhere=exc.elsewhere,
        )
    else:
        try:
            clone = type(exc)(*exc.args)
        except Exception:
            return exc
    clone.__cause__ = exc.__cause__
    return clone
