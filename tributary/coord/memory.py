"""An in-memory coordination store with etcd's semantics, for unit tests.

Invariant: like etcd, the store revision starts at 1 and every write
(put, effective delete, txn that changes something, lease revoke/expiry that
removes keys) bumps it by exactly one, with all of its events sharing that
revision; a key's version counts its puts since it was (re)created, 0 = absent.
Every operation yields to the event loop once first, so concurrent callers
interleave as they would against a server.

Leases never expire by time here: tests call ``expire(lease_id)``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

from tributary.coord.kv import (
    Compare,
    CompareOp,
    Delete,
    KeyValue,
    KvError,
    Put,
    TxnResult,
    WatchEvent,
    WatchEventKind,
)


class MemoryLease:
    def __init__(self, owner: MemoryKv, lease_id: int, ttl: int) -> None:
        self._owner = owner
        self._id = lease_id
        self.ttl = ttl

    @property
    def id(self) -> int:
        return self._id

    async def refresh(self) -> None:
        await asyncio.sleep(0)
        if self._id not in self._owner._leases:
            raise KvError(f"lease {self._id:x} has expired", retriable=False)

    async def revoke(self) -> None:
        await asyncio.sleep(0)
        self._owner.expire(self._id)


@dataclass
class _Watcher:
    prefix: bytes
    queue: asyncio.Queue[WatchEvent] = field(default_factory=asyncio.Queue)


class MemoryKv:
    """``coord.kv.Kv`` in a dict. Keeps the full event history for ``start_revision``."""

    def __init__(self) -> None:
        self.revision = 1
        self._data: dict[bytes, KeyValue] = {}
        self._leases: dict[int, set[bytes]] = {}
        self._lease_ids = itertools.count(0x694D_0000_0001)
        self._history: list[WatchEvent] = []
        self._watchers: list[_Watcher] = []

    async def get(self, key: bytes) -> KeyValue | None:
        await asyncio.sleep(0)
        return self._data.get(key)

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        await asyncio.sleep(0)
        return [self._data[k] for k in sorted(self._data) if k.startswith(prefix)]

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        await asyncio.sleep(0)
        self._check_ops([Put(key, value, lease)])
        self._apply([Put(key, value, lease)])
        return self.revision

    async def delete(self, key: bytes) -> bool:
        await asyncio.sleep(0)
        return self._apply([Delete(key)])

    async def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Put | Delete],
        failure: Sequence[Put | Delete] = (),
    ) -> TxnResult:
        await asyncio.sleep(0)
        ok = all(self._holds(c) for c in compare)
        ops = success if ok else failure
        self._check_ops(ops)
        self._apply(ops)
        return TxnResult(ok, self.revision)

    async def grant_lease(self, ttl_seconds: int) -> MemoryLease:
        await asyncio.sleep(0)
        if ttl_seconds < 1:
            raise KvError(f"lease ttl must be positive, got {ttl_seconds}", retriable=False)
        lease_id = next(self._lease_ids)
        self._leases[lease_id] = set()
        return MemoryLease(self, lease_id, ttl_seconds)

    def expire(self, lease_id: int) -> None:
        """Test hook: the lease ends now, deleting its keys in one revision."""
        keys = self._leases.pop(lease_id, None)
        if keys:
            self._apply([Delete(k) for k in sorted(keys)])

    def watch_prefix(
        self, prefix: bytes, start_revision: int = 0
    ) -> AsyncGenerator[WatchEvent, None]:
        return self._watch(prefix, start_revision)

    async def _watch(self, prefix: bytes, start_revision: int) -> AsyncGenerator[WatchEvent, None]:
        watcher = _Watcher(prefix)
        if start_revision > 0:
            for event in self._history:
                if event.mod_revision >= start_revision and event.key.startswith(prefix):
                    watcher.queue.put_nowait(event)
        self._watchers.append(watcher)
        try:
            while True:
                yield await watcher.queue.get()
        finally:
            self._watchers.remove(watcher)

    def _holds(self, c: Compare) -> bool:
        kv = self._data.get(c.key)
        if c.op is CompareOp.VALUE_EQUAL:
            if not isinstance(c.target, bytes):
                raise TypeError(f"value compare needs bytes, got {c.target!r}")
            return kv is not None and kv.value == c.target  # etcd: absent never equals
        if not isinstance(c.target, int):
            raise TypeError(f"{c.op.value} compare needs an int, got {c.target!r}")
        if c.op is CompareOp.MOD_REVISION_EQUAL:
            return (kv.mod_revision if kv else 0) == c.target
        return (kv.version if kv else 0) == c.target

    def _check_ops(self, ops: Sequence[Put | Delete]) -> None:
        keys = [op.key for op in ops]
        if len(set(keys)) != len(keys):
            raise KvError("duplicate key given in txn request", retriable=False)
        for op in ops:
            if isinstance(op, Put) and op.lease and op.lease not in self._leases:
                raise KvError(f"lease {op.lease:x} not found", retriable=False)

    def _apply(self, ops: Sequence[Put | Delete]) -> bool:
        """Apply ``ops`` at one new revision; False (and no new revision) if none changed."""
        rev = self.revision + 1
        events: list[WatchEvent] = []
        for op in ops:
            old = self._data.get(op.key)
            if old is not None and old.lease:
                self._leases.get(old.lease, set()).discard(op.key)
            if isinstance(op, Put):
                created = old.create_revision if old else rev
                version = old.version + 1 if old else 1
                self._data[op.key] = KeyValue(op.key, op.value, created, rev, version, op.lease)
                if op.lease:
                    self._leases[op.lease].add(op.key)
                events.append(WatchEvent(WatchEventKind.PUT, op.key, op.value, rev))
            elif old is not None:
                del self._data[op.key]
                events.append(WatchEvent(WatchEventKind.DELETE, op.key, b"", rev))
        if not events:
            return False
        self.revision = rev
        self._history.extend(events)
        for watcher in self._watchers:
            for event in events:
                if event.key.startswith(watcher.prefix):
                    watcher.queue.put_nowait(event)
        return True
