"""Leader election on the coordination store, after etcd's ``concurrency.Election``.

Each candidate holds its own lease and puts ``prefix + <lease id in hex>`` bound
to it. The leader is the key with the lowest create revision under ``prefix``;
every other candidate waits for the deletion of its immediate predecessor (the
key with the highest create revision below its own), so one deletion wakes one
candidate, not the whole herd.

Worked example: A, B and C campaign and get keys created at revisions 7, 9 and
12. A (7) leads at once; B waits on A's key, C waits on B's key. A's lease
expires: A's key is deleted, B wakes, finds no key below 9 and leads with epoch
9. C keeps waiting on B.

Invariant: ``is_leader()`` is true only while this candidate's key is the oldest
and the lease is certainly alive *by our own clock*. The local deadline is
measured from the moment each keepalive was *sent*, so it always ends before the
store expires the lease and lets the next candidate in: two candidates never
both believe they lead. Once the lease is lost, ``lost`` is set and stays set;
an Election is then spent and the caller starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import NamedTuple

from tributary.coord.kv import (
    Compare,
    CompareOp,
    Delete,
    KeyValue,
    Kv,
    KvError,
    Lease,
    Put,
    WatchEventKind,
)

log = logging.getLogger(__name__)

Monotonic = Callable[[], float]


class ElectionLost(KvError):
    """This candidate's lease or election key is gone; start a new Election."""

    retriable = True


class Leader(NamedTuple):
    value: bytes
    epoch: int  # create revision of the leader's key


async def current_leader(kv: Kv, prefix: bytes) -> Leader | None:
    """The leader under ``prefix`` (oldest key), or None when nobody campaigns."""
    kvs = await kv.get_prefix(prefix)
    if not kvs:
        return None
    first = min(kvs, key=lambda item: item.create_revision)
    return Leader(first.value, first.create_revision)


class Election:
    """One candidate. Use as ``async with Election(kv, prefix, value) as e: await e.campaign()``."""

    def __init__(
        self,
        kv: Kv,
        prefix: bytes,
        value: bytes,
        ttl: int = 10,
        *,
        monotonic: Monotonic = time.monotonic,
        keepalive: float | None = None,
    ) -> None:
        if ttl < 1:
            raise ValueError("lease ttl must be at least 1 second")
        self._interval = ttl / 3 if keepalive is None else keepalive  # between keepalives
        self._kv = kv
        self._prefix = prefix
        self._value = value
        self._ttl = ttl
        self._monotonic = monotonic
        self._lease: Lease | None = None
        self._deadline = 0.0  # local monotonic time until which the lease surely lives
        self._key_rev = 0  # create revision of our key while we hold one
        self._leading = False
        self._keepalive: asyncio.Task[None] | None = None
        self.lost = asyncio.Event()

    @property
    def key(self) -> bytes:
        if self._lease is None:
            raise RuntimeError("election not entered")
        return self._prefix + f"{self._lease.id:x}".encode()

    @property
    def epoch(self) -> int:
        """Create revision of our key (0 before campaigning)."""
        return self._key_rev

    @property
    def deadline(self) -> float:
        """Local monotonic time until which the lease surely lives (send time of the last
        answered keepalive + ttl); a caller may stop acting some margin before it."""
        return self._deadline

    def is_leader(self) -> bool:
        return self._leading and not self.lost.is_set() and self._monotonic() < self._deadline

    def guard(self) -> Compare:
        """A txn comparison that holds only while our key is the one we campaigned with.

        The key is put once and never modified, so its mod revision equals its
        create revision for exactly as long as it exists.
        """
        if not self._key_rev:
            raise RuntimeError("guard() needs a campaigned election")
        return Compare(self.key, CompareOp.MOD_REVISION_EQUAL, self._key_rev)

    async def __aenter__(self) -> Election:
        sent = self._monotonic()
        self._lease = await self._kv.grant_lease(self._ttl)
        self._deadline = sent + self._ttl
        self._keepalive = asyncio.create_task(
            self._keep_alive(), name=f"election-keepalive-{self._lease.id:x}"
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leading = False
        if self._keepalive is not None:
            self._keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive
            self._keepalive = None
        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            async with asyncio.timeout(max(1.0, self._ttl / 3)):
                await lease.revoke()  # deletes our key with it
        except (KvError, TimeoutError) as e:
            log.warning("could not revoke election lease %x (it will expire): %s", lease.id, e)

    async def campaign(self) -> int:
        """Put our key and wait until it is the oldest; return the epoch.

        Raises ElectionLost if the lease is lost while waiting.
        """
        return await self._until_lost(self._campaign())

    async def resign(self) -> None:
        """Give up leadership (or candidacy): delete our key if it is still ours."""
        self._leading = False
        if self._key_rev:
            rev, self._key_rev = self._key_rev, 0
            await self._kv.txn(
                [Compare(self.key, CompareOp.MOD_REVISION_EQUAL, rev)], [Delete(self.key)]
            )

    async def leader(self) -> Leader | None:
        return await current_leader(self._kv, self._prefix)

    async def _campaign(self) -> int:
        if self.lost.is_set():
            raise ElectionLost("election lease already lost")
        key = self.key
        if not self._key_rev:
            absent = Compare(key, CompareOp.VERSION_EQUAL, 0)
            await self._kv.txn([absent], [Put(key, self._value, self._lease_id())])
            mine = await self._kv.get(key)
            if mine is None:
                raise ElectionLost("election key vanished right after it was put")
            self._key_rev = mine.create_revision
        await self._wait_predecessors()
        self._leading = True
        log.info("elected under %r with epoch %d", self._prefix, self._key_rev)
        return self._key_rev

    async def _wait_predecessors(self) -> None:
        watch_from = self._key_rev
        while True:
            kvs = await self._kv.get_prefix(self._prefix)
            if not any(item.key == self.key for item in kvs):
                self._mark_lost("election key deleted while campaigning")
                raise ElectionLost("election key deleted while campaigning")
            older = [item for item in kvs if item.create_revision < self._key_rev]
            if not older:
                return
            pred = max(older, key=lambda item: item.create_revision)
            try:
                await self._wait_deleted(pred, watch_from)
            except KvError as e:
                log.warning("watch on election predecessor failed, re-reading: %s", e)
                watch_from = 0  # its history may be compacted: poll from now on
                await asyncio.sleep(min(1.0, self._ttl / 3))

    async def _wait_deleted(self, pred: KeyValue, watch_from: int) -> None:
        """Return once ``pred`` (or our own key) is deleted, or after ``ttl`` so the
        caller re-reads.

        Watching from our own create revision misses nothing: ``pred`` was seen
        by a read made after our key was put, so its deletion comes later.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._ttl):
                async for event in self._kv.watch_prefix(self._prefix, watch_from):
                    if event.kind is WatchEventKind.DELETE and event.key in (pred.key, self.key):
                        return

    async def _until_lost(self, work: Coroutine[None, None, int]) -> int:
        job = asyncio.create_task(work, name="election-campaign")
        lost = asyncio.create_task(self.lost.wait(), name="election-lost-wait")
        try:
            await asyncio.wait({job, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (job, lost):
                task.cancel()
            await asyncio.gather(job, lost, return_exceptions=True)
        if self.lost.is_set() or job.cancelled():
            raise ElectionLost("election lease lost while campaigning")
        return job.result()

    def _lease_id(self) -> int:
        if self._lease is None:
            raise RuntimeError("election not entered")
        return self._lease.id

    async def _keep_alive(self) -> None:
        """Refresh every ``keepalive`` seconds (ttl/3 unless given), each answer awaited for
        up to ttl/3; on failure retry quickly until the local deadline passes."""
        assert self._lease is not None
        lease = self._lease
        period = self._ttl / 3
        while True:
            sent = self._monotonic()
            try:
                async with asyncio.timeout(period):
                    await lease.refresh()
                    rev = self._key_rev
                    # a resign() racing with this check changes _key_rev: not a loss
                    if rev and not await self._key_is_ours(rev) and rev == self._key_rev:
                        self._mark_lost("election key is gone")
                        return
                self._deadline = sent + self._ttl
                await asyncio.sleep(self._interval)
            except (KvError, TimeoutError) as e:
                retriable = isinstance(e, TimeoutError) or e.retriable
                if not retriable or self._monotonic() >= self._deadline:
                    self._mark_lost(f"lease keepalive failed: {e!r}")
                    return
                log.warning("lease %x keepalive failed, retrying: %r", lease.id, e)
                await asyncio.sleep(min(0.5, period))

    async def _key_is_ours(self, rev: int) -> bool:
        mine = await self._kv.get(self.key)
        return mine is not None and mine.mod_revision == rev

    def _mark_lost(self, why: str) -> None:
        if self._leading:
            log.warning("lost leadership under %r: %s", self._prefix, why)
        else:
            log.warning("election lease lost under %r: %s", self._prefix, why)
        self._leading = False
        self.lost.set()
