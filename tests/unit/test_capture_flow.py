"""Captures, owner and processors together over the in-memory etcd, with fake upstream/downstream.

Proves: one owner is elected and places a changefeed on one capture; the downstream receives
every upstream transaction exactly once; the status checkpoint and source position follow; a
capture whose lease expires loses its changefeed to another, which resumes from the checkpoint
and converges; the owner's loss elects another; pause stops and resume restarts; remove
clears every key; a non-retriable sink error fails the changefeed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from services.capture.capture import Capture
from services.capture.feeds import CreateRequest, Feeds
from services.capture.manager import ProcessorManager
from services.capture.processor import Processor, ProcessorOptions
from services.capture.spanbook import SpanMark
from services.capture.state import ClusterState, FeedView
from tests.support.capture_fakes import FakeDownstream, FakeLog
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import CaptureInfo, FeedState, TaskPosition
from tributary.cdc.spans import WHOLE_SPAN, TableAssign, TableProgress
from tributary.coord.memory import MemoryKv
from tributary.sinks import SinkError

KEYS = Keys("default")
FEED = FeedId("default", "cf-1")


@dataclass
class Cluster:
    kv: MemoryKv
    log: FakeLog
    down: FakeDownstream
    captures: dict[str, Capture]
    tasks: dict[str, asyncio.Task[None]]
    feeds: Feeds

    def alive(self) -> list[str]:
        return [c for c, t in self.tasks.items() if not t.done()]

    async def kill(self, capture_id: str) -> None:
        """Stop a capture as kill -9 would (no resign, no revoke), then expire its leases."""
        task = self.tasks[capture_id]
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for kv in await self.kv.get_prefix(KEYS.prefix):
            mine = kv.key == KEYS.capture_key(capture_id) or (
                kv.key.startswith(KEYS.owner_prefix) and kv.value == capture_id.encode()
            )
            if mine:
                self.kv.expire(kv.lease)


async def _run_capture(capture: Capture) -> None:
    async with asyncio.TaskGroup() as tg:  # cancelled: every loop and processor goes with it
        capture.start(tg)
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def cluster(n: int = 3) -> AsyncIterator[Cluster]:
    kv, log, down = MemoryKv(), FakeLog(), FakeDownstream()

    def factory(capture_id: str) -> Callable[[FeedView, Mapping[str, SpanMark]], Processor]:
        def make(view: FeedView, spans: Mapping[str, SpanMark]) -> Processor:
            assert view.info is not None and view.status is not None
            opts = ProcessorOptions(batch_txns=4, backoff_min=0.05, backoff_max=0.1)
            return Processor(
                "default",
                capture_id,
                view.feed,
                view.info,
                view.status,
                log,
                down.open,
                opts,
                spans=spans,
                tables=frozenset(s for s in view.assign if "." in s),
            )

        return make

    captures = {
        f"c{i}": Capture(
            kv,
            KEYS,
            CaptureInfo(f"c{i}", f"127.0.0.1:{8300 + i}"),
            factory(f"c{i}"),
            session_ttl=3,
            owner_interval=0.02,
            processor_interval=0.02,
            checkpoint_interval=0.05,
        )
        for i in range(n)
    }
    tasks = {
        c: asyncio.create_task(_run_capture(cap), name=f"cap-{c}") for c, cap in captures.items()
    }
    try:
        yield Cluster(kv, log, down, captures, tasks, Feeds(kv, KEYS, log))
    finally:
        for t in tasks.values():
            t.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


async def eventually(check: Callable[[], object], within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while True:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return
            await asyncio.sleep(0.02)


async def _placed(c: Cluster) -> list[str]:
    view = (await c.feeds.state()).feeds.get(FEED)
    return list(view.tasks) if view else []


async def _checkpoint(c: Cluster) -> int:
    _, status = await c.feeds.get(FEED)
    assert status is not None
    return status.checkpoint_ts


def _owners(c: Cluster) -> list[str]:
    return [cid for cid, cap in c.captures.items() if cap.is_owner() and cid in c.alive()]


async def test_feed_runs_moves_and_converges() -> None:
    async with cluster() as c:
        await eventually(lambda: len(_owners(c)) == 1)
        await c.log.append(3)  # before the changefeed: not replicated
        await c.feeds.create(CreateRequest("cf-1", "blackhole://", start_ts=1000))
        await eventually(lambda: _placed(c))
        first = (await _placed(c))[0]
        await c.log.append(10)
        await eventually(lambda: len(c.down.applied) == 10)
        assert c.down.applied == list(range(1004, 1014))
        await eventually(lambda: _checkpoint(c), within=5)
        await eventually(lambda: _checkpoint_is(c, 1013))
        _, status = await c.feeds.get(FEED)
        assert status is not None and status.source_position == "13"

        await c.kill(first)
        await c.log.append(5)
        await eventually(lambda: _placed_alive(c, first))
        await eventually(lambda: len(set(c.down.applied)) == 15)
        assert sorted(set(c.down.applied)) == list(range(1004, 1019))
        assert len(c.down.applied) == 15  # the sink dropped any replay
        (rows,) = c.down.rows.values()
        assert sorted(rows) == list(range(4, 19))


async def _checkpoint_is(c: Cluster, ts: int) -> bool:
    return await _checkpoint(c) == ts


async def _placed_alive(c: Cluster, dead: str) -> bool:
    placed = await _placed(c)
    return bool(placed) and dead not in placed


async def test_owner_loss_elects_another_which_keeps_placing() -> None:
    async with cluster() as c:
        await eventually(lambda: len(_owners(c)) == 1)
        (owner,) = _owners(c)
        await c.kill(owner)
        await eventually(lambda: len(_owners(c)) == 1 and _owners(c)[0] != owner)
        state = await c.feeds.state()
        assert state.owner is not None and state.owner.capture_id != owner
        assert owner not in state.captures
        await c.feeds.create(CreateRequest("cf-1", "blackhole://", start_ts=1000))
        await eventually(lambda: _placed(c))
        assert owner not in await _placed(c)


async def test_pause_resume_remove() -> None:
    async with cluster(2) as c:
        await c.feeds.create(
            CreateRequest("cf-1", "blackhole://", start_ts=1000, source_position="0")
        )
        await c.log.append(2)
        await eventually(lambda: len(c.down.applied) == 2)
        await c.feeds.pause(FEED)
        await eventually(lambda: _no_tasks(c))
        await eventually(
            lambda: not any(cap.manager and cap.manager.running for cap in c.captures.values())
        )
        await c.log.append(2)
        await asyncio.sleep(0.2)
        assert len(c.down.applied) == 2  # paused: nothing applied
        info, _ = await c.feeds.get(FEED)
        assert info.state is FeedState.STOPPED
        await c.feeds.resume(FEED)
        await eventually(lambda: len(c.down.applied) == 4)
        await c.feeds.remove(FEED)
        await eventually(lambda: _no_keys(c))


async def _no_tasks(c: Cluster) -> bool:
    return not await _placed(c)


async def _no_keys(c: Cluster) -> bool:
    keys = [kv.key for kv in await c.kv.get_prefix(KEYS.prefix)]
    return not any(b"cf-1" in k for k in keys)


async def test_fatal_sink_error_fails_the_feed_and_retriable_warns() -> None:
    async with cluster(1) as c:
        c.down.fail = SinkError("downstream is gone", retriable=True)
        await c.feeds.create(
            CreateRequest("cf-1", "blackhole://", start_ts=1000, source_position="0")
        )
        await c.log.append(1)
        await eventually(lambda: _state_is(c, FeedState.WARNING))
        c.down.fail = None
        await eventually(lambda: _state_is(c, FeedState.NORMAL))
        assert len(c.down.applied) == 1
        c.down.fail = SinkError("bad data", retriable=False)
        await c.log.append(1)
        await eventually(lambda: _state_is(c, FeedState.FAILED))
        info, _ = await c.feeds.get(FEED)
        assert info.error is not None and "bad data" in info.error.message
        assert not await _placed(c)


async def _state_is(c: Cluster, state: FeedState) -> bool:
    info, _ = await c.feeds.get(FEED)
    return info.state is state


async def test_a_closed_manager_starts_no_processor() -> None:
    """The reactor may tick between ``close`` and the cancel of its loop: a processor it
    started then would keep the capture's task group open after the stop."""
    kv, log, down = MemoryKv(), FakeLog(), FakeDownstream()
    feeds = Feeds(kv, KEYS, log)
    await feeds.create(CreateRequest("cf-1", "blackhole://"))
    info, status = await feeds.get(FEED)
    assert status is not None
    claimed = TableProgress(status.checkpoint_ts, status.source_position, "c0")
    view = FeedView(
        FEED,
        info,
        status,
        tasks={"c0": TaskPosition()},
        assign={WHOLE_SPAN: TableAssign("c0")},
        progress={WHOLE_SPAN: claimed},
    )
    state = ClusterState(captures={"c0": CaptureInfo("c0", "127.0.0.1:8300")}, feeds={FEED: view})

    def make(v: FeedView, spans: Mapping[str, SpanMark]) -> Processor:
        assert v.info is not None and v.status is not None
        return Processor("default", "c0", v.feed, v.info, v.status, log, down.open, spans=spans)

    async with asyncio.timeout(10), asyncio.TaskGroup() as tg:  # a late processor: timeout
        manager = ProcessorManager(KEYS, "c0", make, tg)
        manager.tick(state)
        assert list(manager.running) == [FEED]
        await manager.close()
        manager.tick(state)
        assert manager.running == {}
