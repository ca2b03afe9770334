"""Following the pump records and keeping one puller per pump in the merge.

Pump records (``/tidb-binlog/v1/pumps/<id>``) are read from a listing, then
followed by a watch; ``refresh`` (run by ``binlog.Cistern/Notify`` and every
``detect-interval``) lists them again. Each record is handled as tidb-binlog's
``handlePumpStatusUpdate`` does:

    unknown pump, not offline  -> add: merge it from the merger's latest ts, start its puller
    paused                     -> pause pulling (the merge still waits for it)
    online                     -> resume pulling
    pausing / closing          -> nothing (the pump is finishing its work)
    offline                    -> remove it from the merge, stop its puller

Invariant: records are applied in store order per key: a record older (by mod
revision) than one already applied is ignored, so a listing that raced with the
watch can never bring back a pump that went offline, nor pause a resumed one.
A deleted record changes nothing (the pump keeps its last known state).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import NoReturn, Protocol

from services.drainer.errors import CollectorStopped
from services.drainer.feed import Inbox, MergeFeed
from tributary.coord.kv import Kv, KvError, WatchEventKind
from tributary.registry.status import NodeKind, NodeState, NodeStatus, StatusError, kind_prefix

log = logging.getLogger(__name__)

PREFIX = kind_prefix(NodeKind.PUMP)
WATCH_RETRY = 1.0  # seconds before listing and watching again after a store error


class PumpPuller(Protocol):
    """What the collector needs of a puller (``services.drainer.puller.Puller``)."""

    @property
    def addr(self) -> str: ...

    @property
    def last_ts(self) -> int: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    async def run(self) -> None:
        """Pull until cancelled (raises only on a fatal error)."""


MakePuller = Callable[[str, str, int, Inbox], PumpPuller]
"""``(node_id, addr, from_ts, inbox) -> puller``."""


@dataclass(slots=True)
class _Pump:
    state: NodeState
    inbox: Inbox
    puller: PumpPuller
    task: asyncio.Task[None]


class Collector:
    """Run ``run()`` as a task (it owns the puller tasks); ``refresh()`` serves Notify."""

    def __init__(
        self, kv: Kv, feed: MergeFeed, make_puller: MakePuller, *, detect_interval: float = 5.0
    ) -> None:
        self._kv = kv
        self._feed = feed
        self._make_puller = make_puller
        self._detect_interval = detect_interval
        self._pumps: dict[str, _Pump] = {}
        self._seen: dict[bytes, int] = {}  # record key -> mod revision applied
        self._tg: asyncio.TaskGroup | None = None
        self._ready = asyncio.Event()

    def positions(self) -> dict[str, int]:
        """Per pump: the commit ts of the last binlog pulled from it."""
        return {node_id: p.puller.last_ts for node_id, p in self._pumps.items()}

    def pumps(self) -> dict[str, NodeState]:
        """The merged pumps and their last known states."""
        return {node_id: p.state for node_id, p in self._pumps.items()}

    @property
    def ready(self) -> bool:
        """The first listing was applied and the collector is running."""
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        """Return once the first listing was applied."""
        await self._ready.wait()

    async def run(self) -> NoReturn:
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            try:
                tg.create_task(self._detect(), name="drainer-collector-detect")
                await self._follow()
            finally:
                self._tg = None
                self._ready.clear()

    async def refresh(self) -> None:
        """List the pump records and apply them now (Notify: before the pump serves)."""
        await self._ready.wait()
        if self._tg is None:
            raise CollectorStopped("the drainer is not collecting pumps")
        for item in await self._kv.get_prefix(PREFIX):
            self._record(item.key, item.value, item.mod_revision)

    async def _follow(self) -> NoReturn:
        while True:
            try:
                before = (await self._kv.txn((), ())).revision
                for item in await self._kv.get_prefix(PREFIX):
                    self._record(item.key, item.value, item.mod_revision)
                self._ready.set()
                async with aclosing(self._kv.watch_prefix(PREFIX, before + 1)) as events:
                    async for event in events:
                        value = None if event.kind is WatchEventKind.DELETE else event.value
                        self._record(event.key, value, event.mod_revision)
            except KvError as e:
                log.warning("following pump records failed, retrying: %s", e)
            await asyncio.sleep(WATCH_RETRY)

    async def _detect(self) -> NoReturn:
        while True:
            await asyncio.sleep(self._detect_interval)
            try:
                await self.refresh()
            except KvError as e:
                log.warning("listing pump records failed: %s", e)

    def _record(self, key: bytes, value: bytes | None, revision: int) -> None:
        if revision <= self._seen.get(key, 0):
            return  # already applied this or a newer version
        self._seen[key] = revision
        node_id = key[len(PREFIX) :].decode(errors="replace")
        if value is None:
            if node_id in self._pumps:
                log.warning("record of pump %s was deleted; keeping it merged", node_id)
            return
        try:
            status = NodeStatus.from_json(value)
        except StatusError as e:
            log.warning("skipping unparseable pump record %r: %s", key, e)
            return
        self._apply(node_id, status)

    def _apply(self, node_id: str, status: NodeStatus) -> None:
        pump = self._pumps.get(node_id)
        if pump is None:
            if status.state is not NodeState.OFFLINE:
                self._add(node_id, status)
            return
        if status.state is NodeState.OFFLINE:
            self._remove(node_id, pump)
            return
        if status.addr != pump.puller.addr:
            self._move(node_id, pump, status.addr)
        pump.state = status.state
        if status.state is NodeState.PAUSED:
            self._feed.pause(node_id)
            pump.puller.pause()
            log.info("pump %s is paused; stopped pulling it", node_id)
        elif status.state is NodeState.ONLINE:
            self._feed.resume(node_id)
            pump.puller.resume()

    def _spawn(self, node_id: str, puller: PumpPuller) -> asyncio.Task[None]:
        if self._tg is None:
            raise CollectorStopped("the drainer is not collecting pumps")
        return self._tg.create_task(puller.run(), name=f"drainer-pull-{node_id}")

    def _add(self, node_id: str, status: NodeStatus) -> None:
        from_ts = self._feed.merger.latest_ts
        inbox = self._feed.add_source(node_id, from_ts)
        puller = self._make_puller(node_id, status.addr, from_ts, inbox)
        pump = _Pump(status.state, inbox, puller, self._spawn(node_id, puller))
        self._pumps[node_id] = pump
        log.info(
            "added pump %s at %s (%s) from commit ts %d",
            node_id,
            status.addr,
            status.state.value,
            from_ts,
        )
        if status.state is NodeState.PAUSED:
            self._feed.pause(node_id)
            puller.pause()

    def _remove(self, node_id: str, pump: _Pump) -> None:
        pump.task.cancel()
        self._feed.remove_source(node_id)
        del self._pumps[node_id]
        log.info("pump %s is offline; removed it at commit ts %d", node_id, pump.puller.last_ts)

    def _move(self, node_id: str, pump: _Pump, addr: str) -> None:
        """The pump came back at another address: pull there from where we were."""
        pump.task.cancel()
        old = pump.puller
        pump.puller = self._make_puller(node_id, addr, old.last_ts, pump.inbox)
        if pump.state is NodeState.PAUSED:
            pump.puller.pause()
        pump.task = self._spawn(node_id, pump.puller)
        log.info("pump %s moved from %s to %s", node_id, old.addr, addr)
