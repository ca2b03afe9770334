"""Setting a BinlogCluster's status conditions without losing another writer's.

The reconcile handler and the status timer run concurrently and each sets its own conditions
(Degraded/Progressing, Ready). Writing the whole list computed from the body a handler was
given would put back a stale copy of the other's condition. So every change is a
read-modify-write of ``status.conditions`` through the status subresource: read the live list
and its resourceVersion, set only the changed types (``status.set_condition``), and patch with
that resourceVersion as a precondition; a 409 (someone wrote in between) reads again and
retries. Within the operator one ``asyncio.Lock`` per object serializes the writers, so
conflicts come only from other writers (kopf's own patches, users).

Worked example: the live list is [Ready=False] at version 7. Reconcile reads it and prepares
[Ready=False, Degraded=False]; before it writes, the timer sets Ready=True (version 8). The
reconcile's patch at version 7 gets 409, it reads [Ready=True] at 8 and writes
[Ready=True, Degraded=False]: the timer's Ready survives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from binlog_operator import KIND
from binlog_operator.kube import KubeClient, KubeError
from binlog_operator.status import Condition, set_condition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    """One condition to set: its type, status, reason and message."""

    type: str
    status: bool
    reason: str
    message: str = ""


def merge(
    conditions: Iterable[Mapping[str, Any]], changes: Iterable[Change], now: datetime
) -> list[Condition]:
    """``conditions`` with each change applied in order; other types kept as they are."""
    out = [dict(c) for c in conditions]
    for c in changes:
        out = set_condition(out, c.type, c.status, c.reason, c.message, now)
    return out


class Conflict(Exception):
    """The object moved past the resourceVersion the write was based on."""


class StatusStore(Protocol):
    async def read(self, namespace: str, name: str) -> tuple[list[Condition], str] | None:
        """The live conditions and the object's resourceVersion; None if it is gone."""

    async def write(
        self, namespace: str, name: str, conditions: list[Condition], resource_version: str
    ) -> None:
        """Store ``conditions`` if the object is still at ``resource_version``, else Conflict."""


class KubeStatusStore:
    """``StatusStore`` on the status subresource of one kind (BinlogCluster, Pump, Drainer)."""

    def __init__(self, kube: KubeClient, kind: str = KIND) -> None:
        self._kube = kube
        self._kind = kind

    async def read(self, namespace: str, name: str) -> tuple[list[Condition], str] | None:
        found = await self._kube.get_status(namespace, name, self._kind)
        if found is None:
            return None
        conditions = [dict(c) for c in (found.get("status") or {}).get("conditions") or []]
        return conditions, str(found["metadata"]["resourceVersion"])

    async def write(
        self, namespace: str, name: str, conditions: list[Condition], resource_version: str
    ) -> None:
        try:
            await self._kube.patch_status(
                namespace, name, resource_version, {"conditions": conditions}, self._kind
            )
        except KubeError as e:
            if e.conflict:
                raise Conflict(str(e)) from e
            raise


class ConditionWriter:
    def __init__(
        self,
        store: StatusStore,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        attempts: int = 8,
    ) -> None:
        self._store = store
        self._now = now
        self._attempts = attempts
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def set(self, namespace: str, name: str, *changes: Change) -> list[Condition] | None:
        """Apply ``changes`` to the live conditions; the list written (None: object gone).
        Raises KubeError (also when every attempt lost a race)."""
        async with self._locks.setdefault((namespace, name), asyncio.Lock()):
            for attempt in range(1, self._attempts + 1):
                found = await self._store.read(namespace, name)
                if found is None:
                    return None
                current, version = found
                wanted = merge(current, changes, self._now())
                if wanted == current:
                    return wanted
                try:
                    await self._store.write(namespace, name, wanted, version)
                except Conflict:
                    log.debug("%s/%s: conditions moved on (attempt %d)", namespace, name, attempt)
                    continue
                return wanted
        raise KubeError(f"{namespace}/{name}: conditions kept changing; gave up", 409)

    def forget(self, namespace: str, name: str) -> None:
        """Drop the object's lock (it is being deleted)."""
        self._locks.pop((namespace, name), None)
