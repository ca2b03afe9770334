"""The collector over MemoryKv with recording pullers: pump states drive add / pause / resume /
remove, in store order, and Notify's refresh applies a joining pump before it returns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from services.drainer.collector import Collector
from services.drainer.feed import Inbox, MergeFeed
from services.drainer.item import PulledBinlogItem
from services.drainer.merge import Merger
from tests.support.waits import eventually
from tributary.coord.kv import KeyValue
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus, node_key

ONLINE, PAUSED, CLOSING, OFFLINE = (
    NodeState.ONLINE,
    NodeState.PAUSED,
    NodeState.CLOSING,
    NodeState.OFFLINE,
)


@dataclass(eq=False)
class RecordingPuller:
    node_id: str
    addr: str
    from_ts: int
    inbox: Inbox
    position: int = 0
    paused: bool = False
    running: bool = False
    stopped: bool = False
    history: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.position = self.from_ts

    @property
    def last_ts(self) -> int:
        return self.position

    def pause(self) -> None:
        self.paused = True
        self.history.append("pause")

    def resume(self) -> None:
        self.paused = False
        self.history.append("resume")

    async def run(self) -> None:
        self.running = True
        try:
            await asyncio.Event().wait()
        finally:
            self.stopped = True


class StaleListKv(MemoryKv):
    """A store whose listing can be made to answer an old snapshot (a read that raced)."""

    stale: list[KeyValue] | None = None

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        if self.stale is not None:
            await asyncio.sleep(0)
            return self.stale
        return await super().get_prefix(prefix)


@dataclass
class Harness:
    kv: MemoryKv
    registry: NodeRegistry
    collector: Collector
    feed: MergeFeed
    made: list[RecordingPuller]

    def puller(self, node_id: str) -> RecordingPuller:
        return [p for p in self.made if p.node_id == node_id][-1]

    async def put(self, node_id: str, state: NodeState, addr: str = "") -> None:
        await self.registry.update(
            NodeKind.PUMP, NodeStatus(node_id, addr or f"{node_id}:8250", state)
        )


@asynccontextmanager
async def collecting(kv: MemoryKv | None = None, start_ts: int = 100) -> AsyncIterator[Harness]:
    kv = kv or MemoryKv()
    feed = MergeFeed(Merger(start_ts), asyncio.Queue())
    made: list[RecordingPuller] = []

    def make(node_id: str, addr: str, from_ts: int, inbox: Inbox) -> RecordingPuller:
        made.append(RecordingPuller(node_id, addr, from_ts, inbox))
        return made[-1]

    collector = Collector(kv, feed, make, detect_interval=3600)
    h = Harness(kv, NodeRegistry(kv), collector, feed, made)
    task = asyncio.create_task(collector.run(), name="test-collector")
    try:
        async with asyncio.timeout(10):
            await collector.wait_ready()
        yield h
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert all(p.stopped for p in made if p.running)


async def test_initial_listing_adds_every_pump_that_is_not_offline() -> None:
    kv = MemoryKv()
    reg = NodeRegistry(kv)
    for node_id, state in [("a", ONLINE), ("b", PAUSED), ("c", CLOSING), ("d", OFFLINE)]:
        await reg.update(NodeKind.PUMP, NodeStatus(node_id, f"{node_id}:1", state))
    async with collecting(kv) as h:
        assert h.collector.pumps() == {"a": ONLINE, "b": PAUSED, "c": CLOSING}
        assert {p.node_id: (p.from_ts, p.paused) for p in h.made} == {
            "a": (100, False),
            "b": (100, True),
            "c": (100, False),
        }
        sources = h.feed.merger.sources()
        assert sources.keys() == {"a", "b", "c"} and sources["b"].paused
        assert h.collector.positions() == {"a": 100, "b": 100, "c": 100}
        await eventually(lambda: all(p.running for p in h.made))


async def test_states_pause_resume_and_remove_a_pump() -> None:
    async with collecting() as h:
        await h.put("p", ONLINE)
        await eventually(lambda: "p" in h.collector.pumps())
        first = h.puller("p")
        await h.put("p", PAUSED)
        await eventually(lambda: first.paused)
        assert h.feed.merger.sources()["p"].paused
        await h.put("p", ONLINE)
        await eventually(lambda: not first.paused)
        assert not h.feed.merger.sources()["p"].paused
        await h.put("p", CLOSING)  # nothing to do while it finishes
        await h.put("p", OFFLINE)
        await eventually(lambda: "p" not in h.collector.pumps())
        await eventually(lambda: first.stopped)
        assert "p" not in h.feed.merger.sources()
        assert first.history == ["pause", "resume"]
        # it may come back later: a new source, from the merge's latest ts
        h.feed.merger.add_source("other", 100)
        h.feed.merger.push("other", PulledBinlogItem(140, 139, b"", False))
        assert h.feed.merger.pop() is not None
        await h.put("p", ONLINE)
        await eventually(lambda: "p" in h.collector.pumps())
        assert h.puller("p") is not first and h.puller("p").from_ts == 140


async def test_a_pump_that_moved_is_pulled_at_its_new_address_from_where_it_was() -> None:
    async with collecting() as h:
        await h.put("p", ONLINE, addr="host:1")
        await eventually(lambda: "p" in h.collector.pumps())
        old = h.puller("p")
        old.position = 130
        await h.put("p", PAUSED, addr="host:1")
        await eventually(lambda: old.paused)
        await h.put("p", ONLINE, addr="host:2")  # restarted on another port
        await eventually(lambda: h.puller("p") is not old)
        new = h.puller("p")
        assert (new.addr, new.from_ts, new.inbox) == ("host:2", 130, old.inbox)
        assert not new.paused and new.history == ["pause", "resume"]
        await eventually(lambda: old.stopped)


async def test_refresh_applies_a_joining_pump_before_it_returns() -> None:
    async with collecting() as h:
        # written straight to the store, as a joining pump does before calling Notify
        await h.kv.put(node_key(NodeKind.PUMP, "new"), NodeStatus("new", "n:1", ONLINE).to_json())
        await h.collector.refresh()
        assert h.collector.pumps() == {"new": ONLINE}
        assert h.puller("new").from_ts == 100


async def test_a_listing_older_than_what_was_applied_changes_nothing() -> None:
    kv = StaleListKv()
    async with collecting(kv) as h:
        await h.put("p", ONLINE)
        await eventually(lambda: "p" in h.collector.pumps())
        kv.stale = await MemoryKv.get_prefix(kv, b"/tidb-binlog/v1/pumps/")  # shows p online
        await h.put("p", OFFLINE)
        await eventually(lambda: "p" not in h.collector.pumps())
        await h.collector.refresh()  # the raced listing must not bring p back
        assert h.collector.pumps() == {}
        assert len(h.made) == 1


async def test_deleted_and_unparseable_records_change_nothing() -> None:
    async with collecting() as h:
        await h.put("p", ONLINE)
        await eventually(lambda: "p" in h.collector.pumps())
        await h.kv.put(node_key(NodeKind.PUMP, "junk"), b"{not json")
        await h.kv.delete(node_key(NodeKind.PUMP, "p"))
        await h.put("q", ONLINE)  # a later event: the two before were handled
        await eventually(lambda: "q" in h.collector.pumps())
        assert h.collector.pumps() == {"p": ONLINE, "q": ONLINE}
        assert not h.puller("p").stopped
