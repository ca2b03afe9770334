"""A TSO cluster member: campaigns for leadership and serves timestamps while it leads.

Invariant: timestamps are allocated only while the member's election says it
leads (lease alive by the local clock) and after the term's allocator saved its
first window; a failed window save because of a lost election ends the term at
once. Each term starts a fresh Election (and lease) and a fresh allocator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from types import TracebackType

from tributary.coord.election import Election, current_leader
from tributary.coord.kv import Kv, KvError
from tributary.tso.allocator import MAX_COUNT, TimestampAllocator
from tributary.tso.clock import Clock, SystemClock
from tributary.tso.errors import LogicalOverflow, NotLeader, TsoError
from tributary.tso.keys import LEADER_PREFIX, TIMESTAMP_KEY
from tributary.tso.window import KvWindowStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MemberTiming:
    """Timing knobs; the defaults follow PD (3 s leader lease, 50 ms update, 3 s window)."""

    lease_ttl_s: int = 3
    update_interval_s: float = 0.05
    save_interval_ms: int = 3000
    extend_margin_ms: int = 1000
    retry_backoff_s: float = 0.5  # first pause before campaigning again; doubles up to 5 s
    overflow_wait_s: float = 1.0  # how long a request waits for ticks to free logicals


@dataclass(slots=True)
class _Term:
    election: Election
    allocator: TimestampAllocator


class TsoMember:
    """Campaigns in the background; ``get_timestamps`` works while this member leads."""

    def __init__(
        self,
        kv: Kv,
        cluster_id: int,
        advertise_addr: str,
        *,
        clock: Clock | None = None,
        timing: MemberTiming = MemberTiming(),
        prefix: bytes = LEADER_PREFIX,
        timestamp_key: bytes = TIMESTAMP_KEY,
    ) -> None:
        self.cluster_id = cluster_id
        self.advertise_addr = advertise_addr
        self._kv = kv
        self._clock = clock or SystemClock()
        self._timing = timing
        self._prefix = prefix
        self._timestamp_key = timestamp_key
        self._term: _Term | None = None
        self._serving = asyncio.Event()
        self._ticked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def is_leader(self) -> bool:
        term = self._term
        return term is not None and term.allocator.ready and term.election.is_leader()

    async def wait_leading(self) -> None:
        """Return once this member serves timestamps."""
        await self._serving.wait()

    async def leader(self) -> str | None:
        """The advertise address of the current leader, as recorded in the store."""
        found = await current_leader(self._kv, self._prefix)
        return None if found is None else found.value.decode()

    async def members(self) -> list[str]:
        """The advertise addresses of every campaigning member, the leader first."""
        kvs = await self._kv.get_prefix(self._prefix)
        ordered = sorted(kvs, key=lambda item: item.create_revision)
        return list(dict.fromkeys(item.value.decode() for item in ordered))

    async def get_timestamps(self, count: int) -> int:
        """Allocate ``count`` consecutive timestamps; return the highest.

        Raises NotLeader (with the leader's address) when another member leads,
        LogicalOverflow if the logical space stays exhausted, TsoError(retriable=False)
        for a bad count.
        """
        if not 1 <= count <= MAX_COUNT:
            raise TsoError(f"count must be in [1, {MAX_COUNT}], got {count}", retriable=False)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._timing.overflow_wait_s
        while True:
            term = self._term
            if term is None or not self.is_leader:
                raise NotLeader(await self._other_leader())
            try:
                return term.allocator.allocate(count)
            except LogicalOverflow:
                if loop.time() >= give_up:
                    raise
                ticked = self._ticked
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._timing.update_interval_s * 4):
                        await ticked.wait()

    async def join(self) -> None:
        """Wait on the background campaign; it only ends by failing (raises that error).

        An application runs this in its TaskGroup so a broken member brings it down.
        """
        if self._task is None:
            raise RuntimeError("TsoMember not entered")
        await asyncio.shield(self._task)

    async def __aenter__(self) -> TsoMember:
        self._task = asyncio.create_task(self._run(), name=f"tso-member-{self.advertise_addr}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            # a failure was logged by _run and is reported by join(); don't raise it twice
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _other_leader(self) -> str | None:
        try:
            addr = await self.leader()
        except KvError:
            return None
        return None if addr == self.advertise_addr else addr

    async def _run(self) -> None:
        """Campaign, lead, repeat. Retriable failures back off; others end the member."""
        backoff = self._timing.retry_backoff_s
        while True:
            try:
                election = Election(
                    self._kv,
                    self._prefix,
                    self.advertise_addr.encode(),
                    self._timing.lease_ttl_s,
                )
                async with election:
                    epoch = await election.campaign()
                    backoff = self._timing.retry_backoff_s
                    await self._lead(election, epoch)
            except (KvError, TsoError) as e:
                if not e.retriable:
                    log.error("TSO member %s failed: %s", self.advertise_addr, e)
                    raise
                log.warning("TSO term ended: %s; campaigning again in %.1fs", e, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max(self._timing.retry_backoff_s, 5.0))

    async def _lead(self, election: Election, epoch: int) -> None:
        store = KvWindowStore(self._kv, election.guard(), self._timestamp_key)
        allocator = TimestampAllocator(
            self._clock,
            store,
            save_interval_ms=self._timing.save_interval_ms,
            extend_margin_ms=self._timing.extend_margin_ms,
        )
        await allocator.sync()
        self._term = _Term(election, allocator)
        self._serving.set()
        log.info("TSO leader %s serving, epoch %d", self.advertise_addr, epoch)
        try:
            await self._tick_until_lost(election, allocator)
        finally:
            self._term = None
            self._serving.clear()
            log.info("TSO leader %s stepped down (epoch %d)", self.advertise_addr, epoch)

    async def _tick_until_lost(self, election: Election, allocator: TimestampAllocator) -> None:
        while not election.lost.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._timing.update_interval_s):
                    await election.lost.wait()
            if election.lost.is_set():
                return
            try:
                await allocator.tick()
            except NotLeader:
                return
            except TsoError as e:
                if not e.retriable:
                    raise
                log.warning("TSO window update failed, will retry: %s", e)
            ticked, self._ticked = self._ticked, asyncio.Event()
            ticked.set()
