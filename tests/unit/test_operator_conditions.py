"""Conditions set by read-modify-write: a concurrent writer's condition is never lost."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest

from binlog_operator.conditions import Change, ConditionWriter, Conflict, merge
from binlog_operator.kube import KubeError
from binlog_operator.status import Condition

T0 = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)


class Store:
    """An in-memory status subresource: conditions plus a resourceVersion that every write
    bumps; a write at an old version is a Conflict. ``before_write`` runs between a writer's
    read and its write (the moment another writer can sneak in)."""

    def __init__(self, conditions: list[Condition] | None = None) -> None:
        self.conditions: list[Condition] = conditions or []
        self.version = 1
        self.exists = True
        self.writes = 0
        self.conflicts = 0
        self.before_write: Callable[[], Awaitable[None]] | None = None

    async def read(self, namespace: str, name: str) -> tuple[list[Condition], str] | None:
        if not self.exists:
            return None
        found = [dict(c) for c in self.conditions], str(self.version)
        await asyncio.sleep(0)  # a real read yields: other tasks may run before the write
        return found

    async def write(
        self, namespace: str, name: str, conditions: list[Condition], resource_version: str
    ) -> None:
        hook, self.before_write = self.before_write, None
        if hook is not None:
            await hook()
        if resource_version != str(self.version):
            self.conflicts += 1
            raise Conflict(f"at {self.version}, not {resource_version}")
        self.conditions = [dict(c) for c in conditions]
        self.version += 1
        self.writes += 1

    def types(self) -> dict[str, str]:
        return {c["type"]: c["status"] for c in self.conditions}


def test_merge_sets_each_change_and_keeps_other_types_in_order() -> None:
    live = [
        {"type": "Ready", "status": "True", "reason": "AllOnline", "lastTransitionTime": "x"},
        {"type": "Degraded", "status": "True", "reason": "ApiError", "lastTransitionTime": "y"},
    ]
    out = merge(
        live, [Change("Degraded", False, "Reconciled"), Change("Progressing", False, "R")], T0
    )
    assert [c["type"] for c in out] == ["Ready", "Degraded", "Progressing"]
    assert out[0] == live[0]  # untouched
    assert out[1]["status"] == "False" and out[1]["lastTransitionTime"] == "2024-01-01T12:00:00Z"
    assert live[1]["status"] == "True"  # the input is not modified


async def test_a_write_that_lost_a_race_rereads_and_keeps_the_other_writers_condition() -> None:
    store = Store([{"type": "Ready", "status": "False", "reason": "NotAllOnline"}])
    writer = ConditionWriter(store, now=lambda: T0)
    other = ConditionWriter(store, now=lambda: T0)  # e.g. another process: a separate lock

    async def timer_sets_ready() -> None:
        await other.set("ns", "c", Change("Ready", True, "AllOnline"))

    store.before_write = timer_sets_ready
    written = await writer.set("ns", "c", Change("Degraded", False, "Reconciled"))

    assert store.types() == {"Ready": "True", "Degraded": "False"}
    assert written == store.conditions
    assert store.conflicts == 1 and store.writes == 2


async def test_writers_in_one_operator_are_serialized_per_object() -> None:
    store = Store()
    writer = ConditionWriter(store, now=lambda: T0)
    changes = [Change(t, True, "R") for t in ("Ready", "Degraded", "Progressing", "Other")]
    await asyncio.gather(*(writer.set("ns", "c", c) for c in changes))
    assert store.types() == {t.type: "True" for t in changes}
    assert store.conflicts == 0 and store.writes == 4


async def test_no_write_when_nothing_changes_and_none_when_the_object_is_gone() -> None:
    store = Store()
    writer = ConditionWriter(store, now=lambda: T0)
    await writer.set("ns", "c", Change("Ready", True, "AllOnline", "ok"))
    await writer.set("ns", "c", Change("Ready", True, "AllOnline", "ok"))
    assert store.writes == 1
    store.exists = False
    assert await writer.set("ns", "c", Change("Ready", False, "X")) is None


async def test_endless_conflicts_give_up_with_a_kube_error() -> None:
    store = Store()
    writer = ConditionWriter(store, now=lambda: T0, attempts=3)

    async def always_interfere() -> None:
        store.version += 1
        store.before_write = always_interfere

    store.before_write = always_interfere
    with pytest.raises(KubeError, match="kept changing") as e:
        await writer.set("ns", "c", Change("Ready", True, "AllOnline"))
    assert e.value.conflict and store.conflicts == 3 and store.writes == 0
