"""The coordination-store port (etcd semantics) and its value objects.

Invariant: every mutation reports the store revision it produced, and a
transaction either applies all of its operations or none, so callers can build
compare-and-swap protocols (cluster ID creation, elections, TSO windows) on it.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Protocol

from tributary.errors import TributaryError


class KvError(TributaryError):
    """The coordination store failed; ``retriable`` says whether a retry may help."""

    retriable = True


class OutcomeUnknown(KvError):
    """A mutation was sent again after an attempt whose outcome is unknown (its member
    stopped answering), and the answer depends on whether that attempt applied: a txn
    whose compares failed the second time (its own first attempt may have changed what
    they compare), a delete that found nothing. Re-read and decide."""

    retriable = True


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


class WatchEventKind(enum.Enum):
    PUT = "put"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: WatchEventKind
    key: bytes
    value: bytes  # empty for DELETE
    mod_revision: int


class CompareOp(enum.Enum):
    """What a transaction guard compares: the key's value, mod revision or version."""

    VALUE_EQUAL = "value=="
    MOD_REVISION_EQUAL = "mod_revision=="
    VERSION_EQUAL = "version=="  # version 0 means "key absent"


@dataclass(frozen=True, slots=True)
class Compare:
    key: bytes
    op: CompareOp
    target: bytes | int


@dataclass(frozen=True, slots=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Delete:
    key: bytes


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool
    revision: int


class Lease(Protocol):
    """A granted lease. Keys put with it vanish when it expires or is revoked."""

    @property
    def id(self) -> int: ...

    async def refresh(self) -> None:
        """Keep the lease alive once; raises KvError if it has already expired."""

    async def revoke(self) -> None: ...


class Kv(Protocol):
    """etcd-like store: ordered keys, revisions, transactions, leases, watches."""

    async def get(self, key: bytes) -> KeyValue | None: ...

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        """All keys starting with ``prefix``, in key order."""

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        """Store ``value`` and return the new store revision."""

    async def delete(self, key: bytes) -> bool: ...

    async def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Put | Delete],
        failure: Sequence[Put | Delete] = (),
    ) -> TxnResult:
        """All ``compare`` hold -> apply ``success``, else ``failure``, atomically.

        ``revision`` is the store revision after the txn: the current one when it
        wrote nothing (so ``txn((), ())`` reads the current revision)."""

    async def grant_lease(self, ttl_seconds: int) -> Lease: ...

    def watch_prefix(
        self, prefix: bytes, start_revision: int = 0
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events under ``prefix`` with revision >= ``start_revision`` (inclusive, as in
        etcd; 0 = from when iteration starts), in revision order, until closed.

        Close it with ``contextlib.aclosing`` (or by cancelling the consuming task);
        a generator merely dropped after ``break`` is closed later by the loop."""
