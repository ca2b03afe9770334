"""The node registry: read, write and follow pump/drainer status records.

Records live at ``/tidb-binlog/v1/<kind>/<nodeID>`` as tidb-binlog's JSON
``node.Status`` (see ``registry.status``), written without a lease as the Go
nodes do. The node ID of a record is the last segment of its key.

Invariant: a record that does not parse (a foreign or corrupt writer) is
logged and skipped by ``list`` and ``watch``; it never stops a reader. ``watch``
reports every change exactly once after its snapshot: the snapshot is read at
or after revision R and the watch starts at R+1, and events the snapshot already
reflects are dropped by comparing mod revisions.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from tributary.coord.kv import Compare, CompareOp, KeyValue, Kv, Put, WatchEventKind
from tributary.errors import TributaryError
from tributary.registry.status import (
    NodeKind,
    NodeState,
    NodeStatus,
    StatusError,
    kind_prefix,
    node_key,
)

log = logging.getLogger(__name__)

_SET_STATE_ATTEMPTS = 10


class RegistryError(TributaryError):
    """A registry operation failed; ``retriable`` says whether a retry may help."""


class NodeNotFoundError(RegistryError, LookupError):
    """No record for the node."""


@dataclass(frozen=True, slots=True)
class RegistryEvent:
    """A node's record appeared or changed (``status``), or was deleted (None)."""

    node_id: str
    status: NodeStatus | None


class NodeRegistry:
    def __init__(self, kv: Kv) -> None:
        self._kv = kv

    async def update(self, kind: NodeKind, status: NodeStatus) -> None:
        """Write ``status`` as the node's record (create or overwrite)."""
        await self._kv.put(node_key(kind, status.node_id), status.to_json())

    async def get(self, kind: NodeKind, node_id: str) -> NodeStatus | None:
        """The node's record, None if absent; raises StatusError if it does not parse."""
        found = await self._kv.get(node_key(kind, node_id))
        return None if found is None else NodeStatus.from_json(found.value)

    async def list(self, kind: NodeKind, include_offline: bool = True) -> builtins.list[NodeStatus]:
        """Every parseable record of ``kind``, in node-ID (key) order."""
        parsed = [_parse(item) for item in await self._kv.get_prefix(kind_prefix(kind))]
        return [
            s
            for s in parsed
            if s is not None and (include_offline or s.state is not NodeState.OFFLINE)
        ]

    async def set_state(self, kind: NodeKind, node_id: str, state: NodeState) -> NodeStatus:
        """Overwrite the record's state, keeping every other field (binlogctl update-*).

        A read-modify-write guarded by the record's mod revision, retried when a
        concurrent writer (e.g. the node's heartbeat) got in between. Any state
        may be written: this repairs records of dead nodes.
        """
        key = node_key(kind, node_id)
        for _ in range(_SET_STATE_ATTEMPTS):
            found = await self._kv.get(key)
            if found is None:
                raise NodeNotFoundError(f"no {kind.value} node {node_id!r} in the registry")
            updated = NodeStatus.from_json(found.value).with_state(state)
            guard = Compare(key, CompareOp.MOD_REVISION_EQUAL, found.mod_revision)
            put = Put(key, updated.to_json(), lease=found.lease)
            if (await self._kv.txn([guard], [put])).succeeded:
                log.info("set %s node %s state to %s", kind.value, node_id, state.value)
                return updated
        raise RegistryError(
            f"{kind.value} node {node_id!r} kept changing; state not set after "
            f"{_SET_STATE_ATTEMPTS} attempts"
        )

    async def watch(self, kind: NodeKind) -> AsyncGenerator[RegistryEvent, None]:
        """Follow the records of ``kind``: first one event per parseable record
        present now (key order; status set), then each later change in revision
        order: a put of a parseable record -> status set; a delete of a record
        this watch reported -> status None. Unparseable puts are skipped, so the
        node keeps its last good status. Close with ``contextlib.aclosing``."""
        prefix = kind_prefix(kind)
        before = (await self._kv.txn((), ())).revision  # snapshot is read at >= this
        seen: dict[bytes, int] = {}  # key -> mod revision already reflected
        reported: set[bytes] = set()
        for item in await self._kv.get_prefix(prefix):
            seen[item.key] = item.mod_revision
            status = _parse(item)
            if status is not None:
                reported.add(item.key)
                yield RegistryEvent(_node_id(prefix, item.key), status)
        async with aclosing(self._kv.watch_prefix(prefix, before + 1)) as events:
            async for event in events:
                if event.mod_revision <= seen.get(event.key, 0):
                    continue  # already in the snapshot
                seen[event.key] = event.mod_revision
                node_id = _node_id(prefix, event.key)
                if event.kind is WatchEventKind.DELETE:
                    if event.key in reported:
                        reported.discard(event.key)
                        yield RegistryEvent(node_id, None)
                    continue
                status = _parse_raw(event.key, event.value)
                if status is not None:
                    reported.add(event.key)
                    yield RegistryEvent(node_id, status)


def _node_id(prefix: bytes, key: bytes) -> str:
    return key[len(prefix) :].decode(errors="replace")


def _parse(item: KeyValue) -> NodeStatus | None:
    return _parse_raw(item.key, item.value)


def _parse_raw(key: bytes, value: bytes) -> NodeStatus | None:
    try:
        return NodeStatus.from_json(value)
    except StatusError as e:
        log.warning("skipping unparseable node record %r: %s", key, e)
        return None
