"""A first-come-first-served read/write lock for asyncio tasks.

The workload holds one per table: DML shares it (reads), a DDL on the table takes it alone
(write), so a transaction never spans a schema change of a table it writes. Grants are in
arrival order: a waiting writer blocks readers that arrive after it, so a DDL is not starved by
a stream of transactions. Releasing is synchronous (no await), so a cancelled task can never
leave the lock held. Example: R1 holds; W arrives and waits; R2 arrives and waits behind W;
R1 releases -> W is granted; W releases -> R2 is granted.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class RwLock:
    def __init__(self) -> None:
        self._readers = 0
        self._writer = False
        self._waiting: collections.deque[tuple[bool, asyncio.Future[None]]] = collections.deque()

    @property
    def readers(self) -> int:
        return self._readers

    @property
    def writing(self) -> bool:
        return self._writer

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        await self._acquire(write=False)
        try:
            yield
        finally:
            self._readers -= 1
            self._wake()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        await self._acquire(write=True)
        try:
            yield
        finally:
            self._writer = False
            self._wake()

    async def _acquire(self, *, write: bool) -> None:
        if not self._waiting and self._grantable(write):
            self._grant(write)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((write, fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted just before the cancel landed
                if write:
                    self._writer = False
                else:
                    self._readers -= 1
            self._wake()
            raise

    def _grantable(self, write: bool) -> bool:
        return not self._writer and (not write or self._readers == 0)

    def _grant(self, write: bool) -> None:
        if write:
            self._writer = True
        else:
            self._readers += 1

    def _wake(self) -> None:
        while self._waiting:
            write, fut = self._waiting[0]
            if fut.done():  # cancelled while waiting
                self._waiting.popleft()
                continue
            if not self._grantable(write):
                return
            self._waiting.popleft()
            self._grant(write)
            fut.set_result(None)
