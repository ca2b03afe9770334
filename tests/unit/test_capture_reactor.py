"""EtcdWorker commits and the owner's decisions, on the in-memory etcd.

Proves: a patch group is applied only to the value it was computed from (a concurrent write
makes it conflict, and it is recomputed on fresh state); read guards fence writes that depend
on a key another writer changed; a deposed owner's guarded writes never land; the mirror
ignores replayed history; the owner places, moves, finishes and removes changefeeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.capture.errors import Conflict, NotOwner
from services.capture.owner import Owner
from services.capture.state import ClusterState, Mirror
from services.capture.worker import EtcdWorker, Patch, PatchGroup, PatchResult, update
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import (
    CaptureInfo,
    ChangeFeedInfo,
    ChangeFeedStatus,
    FeedState,
    RunningError,
    TaskPosition,
)
from tributary.coord.kv import Compare, CompareOp, WatchEvent, WatchEventKind
from tributary.coord.memory import MemoryKv

KEYS = Keys("default")
FEED = FeedId("default", "cf-1")


def _incr(old: bytes | None) -> PatchResult:
    return str(int(old or b"0") + 1).encode()


async def test_update_retries_lost_races_and_never_loses_an_increment() -> None:
    kv = MemoryKv()
    key = KEYS.prefix + b"counter"
    await asyncio.gather(
        *(update(kv, PatchGroup((Patch(key, _incr),)), attempts=50) for _ in range(20))
    )
    got = await kv.get(key)
    assert got is not None and got.value == b"20"


async def test_update_gives_up_with_conflict_when_a_guard_never_holds() -> None:
    kv = MemoryKv()
    never = Compare(b"/elsewhere", CompareOp.VALUE_EQUAL, b"x")
    with pytest.raises(Conflict):
        await update(kv, PatchGroup((Patch(KEYS.prefix + b"k", _incr),)), [never], attempts=3)
    assert await kv.get(KEYS.prefix + b"k") is None


def test_mirror_ignores_replayed_history() -> None:
    m = Mirror()
    k = KEYS.prefix + b"k"
    m.entries = {}
    m.apply(WatchEvent(WatchEventKind.PUT, k, b"new", 12))
    assert not m.apply(WatchEvent(WatchEventKind.PUT, k, b"old", 10))
    assert not m.apply(WatchEvent(WatchEventKind.DELETE, k, b"", 11))
    assert m.value(k) == b"new"
    assert m.apply(WatchEvent(WatchEventKind.DELETE, k, b"", 13))
    assert not m.apply(WatchEvent(WatchEventKind.PUT, k, b"older", 12))
    assert m.value(k) is None and m.revision == 13


class _Counter:
    """Bumps a counter once per tick until it reaches ``until``."""

    def __init__(self, key: bytes, until: int) -> None:
        self.key = key
        self.until = until
        self.done = asyncio.Event()

    def tick(self, state: ClusterState) -> Sequence[PatchGroup]:
        return [PatchGroup((Patch(self.key, self._bump),))]

    def _bump(self, old: bytes | None) -> PatchResult:
        n = int(old or b"0")
        if n >= self.until:
            self.done.set()
            return old
        return str(n + 1).encode()


async def test_two_workers_racing_on_one_key_both_land_every_step() -> None:
    kv = MemoryKv()
    key = KEYS.prefix + b"n"
    a, b = _Counter(key, 30), _Counter(key, 30)
    tasks = [
        asyncio.create_task(EtcdWorker(kv, KEYS, r, interval=0.01, name=n).run(), name=n)
        for n, r in (("wa", a), ("wb", b))
    ]
    try:
        async with asyncio.timeout(20):
            await a.done.wait()
            await b.done.wait()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    got = await kv.get(key)
    assert got is not None and got.value == b"30"
    assert got.version == 30  # every put was one increment computed from its predecessor


async def test_guarded_worker_writes_nothing_once_its_guard_fails() -> None:
    kv = MemoryKv()
    fence = KEYS.prefix + b"fence"
    rev = await kv.put(fence, b"me")
    key = KEYS.prefix + b"n"
    counter = _Counter(key, 1000)
    guard = Compare(fence, CompareOp.MOD_REVISION_EQUAL, rev)
    worker = EtcdWorker(kv, KEYS, counter, guards=lambda: [guard], interval=0.01, name="w")
    task = asyncio.create_task(worker.run(), name="guarded")
    try:
        async with asyncio.timeout(10):
            while True:
                if await kv.get(key) is not None:
                    break
                await asyncio.sleep(0.01)
        await kv.put(fence, b"someone else")
        await asyncio.sleep(0.05)
        frozen = await kv.get(key)
        await asyncio.sleep(0.2)
        assert await kv.get(key) == frozen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _state(entries: dict[bytes, bytes]) -> ClusterState:
    m = Mirror()
    for i, (k, v) in enumerate(entries.items(), start=2):
        m.apply(WatchEvent(WatchEventKind.PUT, k, v, i))
    return ClusterState.parse(KEYS, m)


def _base(
    state: FeedState = FeedState.NORMAL, target: int = 0, checkpoint: int = 5
) -> dict[bytes, bytes]:
    return {
        KEYS.owner_prefix + b"1": b"a",
        KEYS.capture_key("a"): CaptureInfo("a", "h:1").to_json(),
        KEYS.capture_key("b"): CaptureInfo("b", "h:2").to_json(),
        KEYS.info_key(FEED): ChangeFeedInfo(
            "default", "cf-1", "blackhole://", 1, target, state
        ).to_json(),
        KEYS.status_key(FEED): ChangeFeedStatus(checkpoint, "p").to_json(),
    }


def _apply(groups: Sequence[PatchGroup], entries: dict[bytes, bytes]) -> dict[bytes, bytes]:
    out = dict(entries)
    for g in groups:
        for p in g.patches:
            new = p.fn(out.get(p.key))
            if new is None:
                out.pop(p.key, None)
            elif isinstance(new, bytes):
                out[p.key] = new
    return out


def test_owner_places_on_least_loaded_and_moves_from_dead_capture() -> None:
    owner = Owner(KEYS, "a", epoch=2)
    entries = _base()
    entries[KEYS.task_key("a", FeedId("default", "other"))] = TaskPosition().to_json()
    entries[KEYS.info_key(FeedId("default", "other"))] = ChangeFeedInfo(
        "default", "other", "blackhole://", 1
    ).to_json()
    entries[KEYS.status_key(FeedId("default", "other"))] = ChangeFeedStatus(1, "p").to_json()
    after = _apply(owner.tick(_state(entries)), entries)
    assert KEYS.task_key("b", FEED) in after  # b runs nothing; a runs "other"
    assert KEYS.task_key("a", FEED) not in after
    del after[KEYS.capture_key("b")]  # b's lease expired
    moved = _apply(owner.tick(_state(after)), after)
    assert KEYS.task_key("b", FEED) not in moved and KEYS.task_key("a", FEED) in moved


def test_owner_finishes_fails_stops_and_removes() -> None:
    owner = Owner(KEYS, "a", epoch=2)
    entries = _base(target=5, checkpoint=5)
    entries[KEYS.task_key("a", FEED)] = TaskPosition().to_json()
    after = _apply(owner.tick(_state(entries)), entries)
    assert ChangeFeedInfo.from_json(after[KEYS.info_key(FEED)]).state is FeedState.FINISHED
    assert KEYS.task_key("a", FEED) not in after

    entries = _base()
    entries[KEYS.task_key("a", FEED)] = TaskPosition(
        error=RunningError("x", retriable=False)
    ).to_json()
    after = _apply(owner.tick(_state(entries)), entries)
    info = ChangeFeedInfo.from_json(after[KEYS.info_key(FEED)])
    assert info.state is FeedState.FAILED and info.error is not None
    assert KEYS.task_key("a", FEED) not in after

    entries = _base(FeedState.STOPPED)
    entries[KEYS.task_key("b", FEED)] = TaskPosition().to_json()
    after = _apply(owner.tick(_state(entries)), entries)
    assert KEYS.task_key("b", FEED) not in after and KEYS.info_key(FEED) in after

    entries = _base(FeedState.REMOVED)
    after = _apply(owner.tick(_state(entries)), entries)
    assert KEYS.info_key(FEED) not in after and KEYS.status_key(FEED) not in after


def test_owner_refuses_to_act_when_not_owner() -> None:
    with pytest.raises(NotOwner):
        Owner(KEYS, "b", epoch=2).tick(_state(_base()))
    with pytest.raises(NotOwner):
        Owner(KEYS, "a", epoch=99).tick(_state(_base()))
