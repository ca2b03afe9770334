"""The demo's load generator: concurrent writers doing bank transactions the way TiDB does.

Per transaction: ``start_ts`` from the TSO, a P-binlog carrying the rows, then
either ``commit_ts`` from the TSO and a commit C-binlog or (about 5 %) a
rollback C-binlog. Each writer owns its accounts (ids ``w * 1_000_000 + n``),
so writers never conflict; a writer moves money only between its own accounts.

Invariants: a transaction lands in :attr:`LoadGenerator.committed` and in the
writers' :attr:`books <LoadGenerator.books>` only after its commit C-binlog was
acknowledged; a prewrite that succeeded is always followed by a commit or a
rollback C-binlog (also when no commit ts can be had), so no pump is left
waiting on it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Protocol

from pumpclient import PumpClientError
from services.demo.bank import Change, Ledger, Row, encode_txn, row_key
from tso.client import Tso
from tso.errors import TsoError

log = logging.getLogger(__name__)

OPENING_BALANCE = 1000
ACCOUNTS_PER_WRITER = 1_000_000  # id space of one writer
OPEN_RATIO = 0.05  # share of transactions that open an account once a writer has two


class BinlogWriter(Protocol):
    """The part of ``pumpclient.PumpsClient`` a writer uses."""

    async def prewrite(
        self, start_ts: int, prewrite_value: bytes, prewrite_key: bytes = ...
    ) -> None: ...

    async def commit(self, start_ts: int, commit_ts: int) -> None: ...

    async def rollback(self, start_ts: int) -> None: ...


@dataclass(slots=True)
class LoadStats:
    """Counters, only growing."""

    commits: int = 0  # transactions whose commit C-binlog was acknowledged
    rollbacks: int = 0  # transactions rolled back on purpose
    failures: int = 0  # transactions abandoned: no timestamp, or the prewrite was refused

    @property
    def txns(self) -> int:
        return self.commits + self.rollbacks


@dataclass(frozen=True, slots=True)
class Committed:
    start_ts: int
    commit_ts: int
    changes: tuple[Change, ...]


class LoadGenerator:
    def __init__(
        self,
        tso: Tso,
        client: BinlogWriter,
        *,
        writers: int = 32,
        rollback_ratio: float = 0.05,
        seed: int | None = None,
    ) -> None:
        if writers < 1:
            raise ValueError("need at least one writer")
        self._tso = tso
        self._client = client
        self._writers = writers
        self._rollback_ratio = rollback_ratio
        self._seed = random.randrange(1 << 32) if seed is None else seed
        self.stats = LoadStats()
        self.committed: list[Committed] = []
        self.books = Ledger()  # every writer's committed balances (disjoint ids)

    async def run(self, duration: float, stop: asyncio.Event | None = None) -> None:
        """Run every writer for ``duration`` seconds or until ``stop`` is set.

        Either way each writer finishes the transaction it is in, so no RPC is
        cut off and no prewrite is left without its commit or rollback.
        """
        deadline = asyncio.get_running_loop().time() + duration
        stop = stop or asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            for w in range(self._writers):
                tg.create_task(self._writer(w, deadline, stop), name=f"demo-writer-{w}")

    async def _writer(self, index: int, deadline: float, stop: asyncio.Event) -> None:
        rng = random.Random(self._seed * 1000 + index)
        accounts: list[int] = []  # this writer's open accounts
        loop = asyncio.get_running_loop()
        while loop.time() < deadline and not stop.is_set():
            changes = self._plan(index, accounts, rng)
            rollback = rng.random() < self._rollback_ratio
            try:
                done = await self._transact(changes, rollback)
            except (TsoError, PumpClientError) as e:
                self.stats.failures += 1
                log.warning("writer %d: transaction abandoned: %s", index, e)
                await asyncio.sleep(0.2)
                continue
            if done is None:
                self.stats.rollbacks += 1
                continue
            self.books.apply(changes)
            self.committed.append(done)
            self.stats.commits += 1
            accounts.extend(c.new.id for c in changes if c.old is None)

    def _plan(self, index: int, accounts: list[int], rng: random.Random) -> tuple[Change, ...]:
        """Open an account, or move up to 100 between two of this writer's accounts."""
        if len(accounts) < 2 or rng.random() < OPEN_RATIO:
            new_id = index * ACCOUNTS_PER_WRITER + len(accounts) + 1
            return (Change(None, Row(new_id, OPENING_BALANCE)),)
        src, dst = rng.sample(accounts, 2)
        have, get = self.books.balances[src], self.books.balances[dst]
        amount = rng.randint(0, min(100, have))
        return (
            Change(Row(src, have), Row(src, have - amount)),
            Change(Row(dst, get), Row(dst, get + amount)),
        )

    async def _transact(self, changes: tuple[Change, ...], rollback: bool) -> Committed | None:
        """One transaction; the commit, or None if it was rolled back on purpose."""
        start_ts = await self._tso.get_ts()
        value = encode_txn(changes)
        await self._client.prewrite(start_ts, value, row_key(changes[0].new.id))
        if rollback:
            await self._client.rollback(start_ts)
            return None
        try:
            commit_ts = await self._tso.get_ts()
        except TsoError:
            await self._client.rollback(start_ts)
            raise
        await self._client.commit(start_ts, commit_ts)
        return Committed(start_ts, commit_ts, changes)
