"""Where the client learns which pumps exist: a small port and its etcd-backed
implementation.

Invariant: after ``list_pumps()`` returned a snapshot, ``watch_pumps()`` yields
every change made after that snapshot (possibly replaying a few already in
it; applying a change twice is harmless), until it raises
:class:`PumpSourceError`; the caller then lists again and watches again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from tributary.coord.kv import Kv, KvError, WatchEventKind
from tributary.errors import TributaryError
from tributary.registry.status import NodeKind, NodeStatus, StatusError, kind_prefix

log = logging.getLogger(__name__)


class PumpSourceError(TributaryError):
    """The pump list or watch failed; list again and re-watch."""

    retriable = True


@dataclass(frozen=True, slots=True)
class PumpChange:
    """A pump record was written (``status`` set) or deleted (``status`` None)."""

    node_id: str
    status: NodeStatus | None


class PumpSource(Protocol):
    async def list_pumps(self) -> list[NodeStatus]:
        """Every pump record now."""

    def watch_pumps(self) -> AsyncIterator[PumpChange]:
        """Changes after the last ``list_pumps()``, until cancelled or failed."""


class KvPumpSource:
    """Reads ``/tidb-binlog/v1/pumps/<id>`` records from a :class:`Kv`.

    A listing notes the store revision R before it reads (an empty
    transaction reports it); the watch then starts at R + 1, so nothing
    written after the listing is missed, and changes the listing already saw
    are merely applied twice.
    """

    def __init__(self, kv: Kv) -> None:
        self._kv = kv
        self._prefix = kind_prefix(NodeKind.PUMP)
        self._next_revision = 0

    async def list_pumps(self) -> list[NodeStatus]:
        try:
            revision = (await self._kv.txn((), ())).revision
            kvs = await self._kv.get_prefix(self._prefix)
        except KvError as e:
            raise PumpSourceError(f"list pumps: {e}") from e
        statuses: list[NodeStatus] = []
        for item in kvs:
            try:
                statuses.append(NodeStatus.from_json(item.value))
            except StatusError as e:
                log.warning("skipping unreadable pump record %r: %s", item.key, e)
        self._next_revision = revision + 1
        return statuses

    async def watch_pumps(self) -> AsyncIterator[PumpChange]:
        events = self._kv.watch_prefix(self._prefix, self._next_revision)
        try:
            async for event in events:
                self._next_revision = event.mod_revision + 1
                node_id = event.key[len(self._prefix) :].decode(errors="replace")
                if event.kind is WatchEventKind.DELETE:
                    yield PumpChange(node_id, None)
                    continue
                try:
                    status = NodeStatus.from_json(event.value)
                except StatusError as e:
                    log.warning("skipping unreadable pump record %r: %s", event.key, e)
                    continue
                yield PumpChange(status.node_id, status)
        except KvError as e:
            raise PumpSourceError(f"watch pumps: {e}") from e
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        raise PumpSourceError("pump watch ended")
