"""The pump's registration gate: a pump whose registry writes stopped getting through for
``registration-timeout`` refuses prewrites (retriable, so the client moves to another pump) and
still takes commits and rollbacks; a successful write opens the gate again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.pump.intake import Intake, Reason, WriteRefused
from services.pump.registration import Registration
from services.pump.state import PumpState
from services.pump.storage import WriteItem
from tributary.coord.kv import KvError
from tributary.coord.memory import MemoryKv
from tributary.registry.heartbeat import Heartbeat
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.wire.binlog import Binlog, BinlogType
from tributary.wire.peek import BinlogHeader


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Store:
    def __init__(self) -> None:
        self.items: list[WriteItem] = []

    def writable_for(self, header: BinlogHeader) -> bool:
        return True

    async def write(self, items: Sequence[WriteItem]) -> None:
        self.items.extend(items)


def payload(tp: BinlogType, start: int, commit: int = 0) -> bytes:
    return bytes(Binlog(tp=tp, start_ts=start, commit_ts=commit, prewrite_value=b"v"))


def test_never_registered_is_not_current() -> None:
    assert not Registration(10.0, Clock()).current()


def test_current_until_the_timeout_after_the_last_renewal() -> None:
    clock = Clock()
    reg = Registration(10.0, clock)
    reg.renewed()
    clock.now += 9.9
    assert reg.current()
    clock.now += 0.1
    assert not reg.current()
    reg.renewed()
    assert reg.current()
    assert reg.age() == 0.0


def test_a_positive_timeout_is_required() -> None:
    with pytest.raises(ValueError):
        Registration(0)


async def test_a_lapsed_registration_refuses_prewrites_and_takes_commits() -> None:
    clock = Clock()
    reg = Registration(10.0, clock)
    reg.renewed()
    store = Store()
    intake = Intake(store, PumpState(NodeState.ONLINE), 1 << 20, registered=reg.current)
    await intake.write(payload(BinlogType(BinlogType.Prewrite), 10))
    clock.now += 30
    with pytest.raises(WriteRefused) as refused:
        await intake.write(payload(BinlogType(BinlogType.Prewrite), 20))
    assert refused.value.reason is Reason.NOT_REGISTERED
    assert refused.value.retriable
    await intake.write(payload(BinlogType(BinlogType.Commit), 10, 11))  # the txn under way finishes
    await intake.write(payload(BinlogType(BinlogType.Rollback), 30, 30))  # a fake binlog too
    assert [i.header.tp for i in store.items] == [
        BinlogType.Prewrite,
        BinlogType.Commit,
        BinlogType.Rollback,
    ]
    reg.renewed()
    await intake.write(payload(BinlogType(BinlogType.Prewrite), 40))
    assert len(store.items) == 4


class FlakyKv(MemoryKv):
    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        if self.failing:
            raise KvError("injected: etcd unreachable")
        return await super().put(key, value, lease)


async def test_the_heartbeat_renews_only_on_a_successful_write() -> None:
    kv = FlakyKv()
    written: list[NodeStatus] = []
    status = NodeStatus(node_id="p1", addr="127.0.0.1:8250", state=NodeState.ONLINE)
    beat = Heartbeat(
        NodeRegistry(kv), NodeKind.PUMP, lambda: status, 1.0, on_written=written.append
    )
    await beat.beat_now()
    assert written == [status]
    kv.failing = True
    with pytest.raises(KvError):
        await beat.beat_now()
    assert written == [status]
