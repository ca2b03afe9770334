"""EtcdWorker: run a reactor over a mirrored etcd prefix, committing its patches as guarded txns.

After TiCDC's ``pkg/orchestrator`` (reference ticdc.md §2). The worker reads the prefix, then
follows it with a watch (``state.Mirror``). Each tick hands the reactor a fresh
``ClusterState``; the reactor answers with ``PatchGroup``s, each committed as one etcd txn:

* every patch is a pure read-modify-write function of the key's current value (``None``:
  absent; returning ``None`` deletes, ``UNCHANGED`` leaves it);
* the txn is guarded by ``mod_revision(key) == the revision the value was read at`` (0 for an
  absent key) for every patched key and every key the group declares it read (``reads``), and
  by the caller's extra guards (the owner's election key: a deposed owner's txns all fail);
* a failed guard is a conflict: the worker waits for the watch to bring the newer state and
  ticks again, so the reactor recomputes its patches on fresh data (optimistic concurrency).

Read-your-writes: after a commit at revision R the reactor is not ticked again until the mirror
has caught up to R, so it never decides on a state older than its own last write.

``update`` commits one group outside any worker (API writes): it reads the keys straight from
etcd and retries on conflict.

Invariant: no patch is ever applied to a value other than the one it was computed from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from services.capture.errors import Conflict
from services.capture.state import ClusterState, Entry, Mirror
from tributary.cdc.keys import Keys
from tributary.coord.kv import Compare, CompareOp, Delete, Kv, KvError, Put, TxnResult

log = logging.getLogger(__name__)


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()

PatchResult = bytes | None | _Unchanged
PatchFn = Callable[[bytes | None], PatchResult]


@dataclass(frozen=True, slots=True)
class Patch:
    key: bytes
    fn: PatchFn


@dataclass(frozen=True, slots=True)
class PatchGroup:
    """Patches committed together in one txn; ``reads``: keys the decision depended on."""

    patches: tuple[Patch, ...]
    reads: tuple[bytes, ...] = ()


class Reactor(Protocol):
    def tick(self, state: ClusterState) -> Sequence[PatchGroup]:
        """Look at the state, act, and say what to write. May raise to stop the worker."""
        ...


Reader = Callable[[bytes], Awaitable[Entry | None]]
Guards = Callable[[], Sequence[Compare]]


async def commit(kv: Kv, group: PatchGroup, read: Reader, guards: Sequence[Compare]) -> TxnResult:
    """Compute the group on the values ``read`` gives and commit it guarded by their revisions.

    Returns ``TxnResult(True, 0)`` without writing when no patch changes anything."""
    entries: dict[bytes, Entry | None] = {}
    for key in dict.fromkeys([*(p.key for p in group.patches), *group.reads]):
        entries[key] = await read(key)  # each key read once: values and guards agree
    compares: list[Compare] = list(guards)
    for key, entry in entries.items():
        compares.append(
            Compare(key, CompareOp.MOD_REVISION_EQUAL, entry.mod_revision if entry else 0)
        )
    current = {key: (entry.value if entry else None) for key, entry in entries.items()}
    for patch in group.patches:
        new = patch.fn(current[patch.key])
        if not isinstance(new, _Unchanged):
            current[patch.key] = new
    ops: list[Put | Delete] = []
    for key in dict.fromkeys(p.key for p in group.patches):
        entry = entries[key]
        if current[key] == (entry.value if entry else None):
            continue
        value = current[key]
        ops.append(Delete(key) if value is None else Put(key, value))
    if not ops:
        return TxnResult(True, 0)
    return await kv.txn(compares, ops)


async def update(
    kv: Kv, group: PatchGroup, guards: Sequence[Compare] = (), attempts: int = 10
) -> int:
    """Commit one group read straight from etcd, retrying conflicts; the txn's revision
    (0 when nothing changed). Raises Conflict after ``attempts`` lost races."""

    async def read(key: bytes) -> Entry | None:
        kv_ = await kv.get(key)
        return Entry(kv_.value, kv_.mod_revision) if kv_ is not None else None

    for attempt in range(attempts):
        result = await commit(kv, group, read, guards)
        if result.succeeded:
            return result.revision
        await asyncio.sleep(0.01 * (attempt + 1))
    raise Conflict(f"gave up after {attempts} conflicting attempts")


class EtcdWorker:
    """Runs one reactor over ``keys.prefix`` until the reactor raises or the task is cancelled."""

    def __init__(
        self,
        kv: Kv,
        keys: Keys,
        reactor: Reactor,
        *,
        guards: Guards = lambda: (),
        interval: float = 0.2,
        name: str = "worker",
    ) -> None:
        self._kv = kv
        self._keys = keys
        self._reactor = reactor
        self._guards = guards
        self._interval = interval
        self._name = name
        self.mirror = Mirror()
        self._changed = asyncio.Event()
        self._watch_error: BaseException | None = None

    async def run(self) -> None:
        revision = (await self._kv.txn((), ())).revision
        self.mirror.load(await self._kv.get_prefix(self._keys.prefix), revision)
        watch = asyncio.create_task(self._watch(revision + 1), name=f"{self._name}-watch")
        try:
            await self._loop()
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    async def _watch(self, start: int) -> None:
        try:
            async with contextlib.aclosing(self._kv.watch_prefix(self._keys.prefix, start)) as ev:
                async for event in ev:
                    self.mirror.apply(event)
                    self._changed.set()
        except KvError as e:
            self._watch_error = e
            self._changed.set()

    async def _loop(self) -> None:
        barrier = 0
        while True:
            if self._watch_error is not None:
                raise self._watch_error
            self._changed.clear()
            if self.mirror.revision >= barrier:
                state = ClusterState.parse(self._keys, self.mirror)
                for group in self._reactor.tick(state):
                    result = await commit(self._kv, group, self._read, self._guards())
                    if not result.succeeded:
                        log.debug("%s: conflict, re-ticking on fresh state", self._name)
                        break
                    barrier = max(barrier, result.revision)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval):
                    await self._changed.wait()
            await asyncio.sleep(min(0.05, self._interval))  # rate limit under event storms

    async def _read(self, key: bytes) -> Entry | None:
        return self.mirror.entries.get(key)
