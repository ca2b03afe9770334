"""The pump client following the pump records across a broken watch: the
window between a listing and the watch that follows it, with the records in
the in-memory Kv and scripted pump peers (real grpclib servers on loopback)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from tests.support.scripted_pump import ScriptedPump, running_pumps
from tests.support.waits import eventually
from tributary.coord.kv import KeyValue, KvError, WatchEvent
from tributary.coord.memory import MemoryKv
from tributary.pumpclient import PumpsClient
from tributary.registry.status import NodeKind, node_key

FAST: dict[str, Any] = {
    "retry_interval": 0.01,
    "probe_interval": 3600,
    "write_timeout": 5,
    "commit_timeout": 5,
}


class ScriptedKv(MemoryKv):
    """A MemoryKv whose watches can be made to break on their next event (the
    event is lost, as with a dropped etcd watch), and which can run a hook
    right after a prefix listing, before its caller gets to watch."""

    def __init__(self) -> None:
        super().__init__()
        self.break_next_event = False
        self.after_list: Callable[[], Awaitable[None]] | None = None

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        kvs = await super().get_prefix(prefix)
        hook, self.after_list = self.after_list, None
        if hook is not None:
            await hook()
        return kvs

    def watch_prefix(
        self, prefix: bytes, start_revision: int = 0
    ) -> AsyncGenerator[WatchEvent, None]:
        return self._breakable(super().watch_prefix(prefix, start_revision))

    async def _breakable(
        self, events: AsyncGenerator[WatchEvent, None]
    ) -> AsyncGenerator[WatchEvent, None]:
        try:
            async for event in events:
                if self.break_next_event:
                    self.break_next_event = False
                    raise KvError("watch broke", retriable=True)
                yield event
        finally:
            await events.aclose()


async def register(kv: MemoryKv, peer: ScriptedPump) -> None:
    await kv.put(node_key(NodeKind.PUMP, peer.node_id), peer.record().to_json())


async def test_pump_registered_between_an_empty_relisting_and_the_watch_is_seen() -> None:
    """The watch after a listing starts at the store revision read before the
    listing, so a pump registered in between is not missed even when the
    listing found no pump at all (no key revision to start from)."""
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        kv = ScriptedKv()
        await register(kv, a)
        async with PumpsClient(kv, 7, **FAST) as client:
            assert set(client.pumps.pumps) == {"a"}
            kv.after_list = lambda: register(kv, b)  # after the relisting, before the watch
            kv.break_next_event = True
            await kv.delete(node_key(NodeKind.PUMP, "a"))  # lost with the broken watch
            await eventually(lambda: kv.after_list is None)  # relisted: no pump
            await eventually(lambda: set(client.pumps.available) == {"b"})
            await client.prewrite(1, b"v")
        assert [h.start_ts for h in b.binlogs()] == [1]
        assert a.binlogs() == []
