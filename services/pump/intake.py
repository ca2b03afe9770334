"""The pump's write path: validate, apply state rules, store durably.

Invariant: a binlog is acknowledged only after storage made it durable, and a
refused binlog changes nothing. Prewrites are refused unless the pump is
online, its registration in etcd is current (``services.pump.registration``) and it
has disk space above the stop-write threshold; commits, rollbacks
and fake binlogs are still stored so transactions under way can finish. An
empty payload is a liveness probe and stores nothing.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from services.pump.state import PumpState
from services.pump.storage import StorageError, StorageFull, WriteItem
from tributary.errors import TributaryError
from tributary.wire import refusal
from tributary.wire.binlog import BinlogType
from tributary.wire.peek import BinlogHeader, MalformedBinlog, peek

log = logging.getLogger(__name__)


class Reason(enum.Enum):
    """Why a write was refused; the API edge maps each to a gRPC status and sends the
    value along (``tributary.wire.refusal``)."""

    MALFORMED = "malformed"
    TOO_LARGE = "too-large"
    NOT_ONLINE = refusal.NOT_ONLINE
    NOT_REGISTERED = refusal.NOT_REGISTERED
    DISK_FULL = refusal.DISK_FULL
    STORAGE = "storage"


class WriteRefused(TributaryError):
    """A binlog was not stored; ``retriable`` says whether another try (or pump) may succeed."""

    def __init__(self, reason: Reason, message: str, *, retriable: bool) -> None:
        super().__init__(message, retriable=retriable)
        self.reason = reason


class BinlogStore(Protocol):
    """What the write path needs from storage."""

    def writable_for(self, header: BinlogHeader) -> bool: ...

    async def write(self, items: Sequence[WriteItem]) -> None: ...


def validate(payload: bytes, max_size: int) -> WriteItem | None:
    """The rules that need no state: size, wire structure, a commit after its start; None
    for a probe. Raises WriteRefused."""
    if len(payload) > max_size:
        raise WriteRefused(
            Reason.TOO_LARGE,
            f"binlog of {len(payload)} bytes exceeds max-message-size {max_size}",
            retriable=False,
        )
    try:
        header = peek(payload)
    except MalformedBinlog as e:
        raise WriteRefused(Reason.MALFORMED, f"malformed binlog: {e}", retriable=False) from e
    if header.is_probe:
        return None
    if header.tp is BinlogType.Commit and header.commit_ts <= header.start_ts:
        raise WriteRefused(
            Reason.MALFORMED,
            f"commit binlog with commit_ts {header.commit_ts} <= start_ts {header.start_ts}",
            retriable=False,
        )
    return WriteItem(payload, header)


StoreValidated = Callable[[Sequence[WriteItem]], Awaitable[list[WriteRefused | None]]]


async def store_validated(
    max_size: int, payloads: Sequence[bytes], store: StoreValidated
) -> list[WriteRefused | None]:
    """``payloads`` validated one by one (refusals in place), the valid rest given to
    ``store`` at once; each payload's refusal, or None if stored (or a probe)."""
    results: list[WriteRefused | None] = [None] * len(payloads)
    items: list[WriteItem] = []
    positions: list[int] = []
    for i, payload in enumerate(payloads):
        try:
            item = validate(payload, max_size)
        except WriteRefused as e:
            results[i] = e
            continue
        if item is not None:
            items.append(item)
            positions.append(i)
    if items:
        for i, r in zip(positions, await store(items), strict=True):
            results[i] = r
    return results


class Intake:
    """Accepts binlogs for one pump and remembers when the last real write arrived."""

    def __init__(
        self,
        store: BinlogStore,
        state: PumpState,
        max_message_size: int,
        monotonic: Callable[[], float] = time.monotonic,
        registered: Callable[[], bool] = lambda: True,
    ) -> None:
        self._store = store
        self._state = state
        self._registered = registered
        self._max_size = max_message_size
        self._monotonic = monotonic
        self.last_write = monotonic()
        self.written = 0

    def check(self, payload: bytes) -> WriteItem | None:
        """Validate one payload and apply the state rules; None for a probe. Raises
        WriteRefused."""
        item = validate(payload, self._max_size)
        if item is not None:
            self.admit(item.header)
        return item

    def admit(self, header: BinlogHeader) -> None:
        """The state and disk rules for a validated binlog. Raises WriteRefused."""
        if header.tp is BinlogType.Prewrite:
            if not self._state.accepts_prewrite():
                raise WriteRefused(
                    Reason.NOT_ONLINE,
                    f"pump is not online (state {self._state.state.value}); prewrite refused",
                    retriable=True,
                )
            if not self._registered():
                raise WriteRefused(
                    Reason.NOT_REGISTERED,
                    "pump could not renew its registration in etcd within registration-timeout; "
                    "prewrite refused",
                    retriable=True,
                )
            if not self._store.writable_for(header):
                raise WriteRefused(
                    Reason.DISK_FULL,
                    "pump disk space is below stop-write-at-available-space; prewrite refused",
                    retriable=True,
                )
        elif not self._state.accepts_finish():
            raise WriteRefused(Reason.NOT_ONLINE, "pump is offline", retriable=True)

    async def write(self, payload: bytes) -> None:
        """Store one binlog (the unary ``WriteBinlog`` path)."""
        item = self.check(payload)
        if item is None:
            return
        await self._store_items([item])

    async def write_many(self, payloads: Sequence[bytes]) -> list[WriteRefused | None]:
        """Store a batch; the result holds each payload's refusal, or None if stored.

        Invalid payloads are refused one by one; the valid rest go to storage as one
        request, so they share one append, one fsync and one index transaction.
        """
        return await store_validated(self._max_size, payloads, self.store_validated)

    async def store_validated(self, items: Sequence[WriteItem]) -> list[WriteRefused | None]:
        """Store binlogs already validated (``validate``, in this process or a front's): the
        state rules per binlog, then the admitted ones as one storage request."""
        results: list[WriteRefused | None] = [None] * len(items)
        admitted: list[WriteItem] = []
        positions: list[int] = []
        for i, item in enumerate(items):
            try:
                self.admit(item.header)
            except WriteRefused as e:
                results[i] = e
                continue
            admitted.append(item)
            positions.append(i)
        if admitted:
            try:
                await self._store_items(admitted)
            except WriteRefused as e:
                for i in positions:
                    results[i] = e
        return results

    async def _store_items(self, items: list[WriteItem]) -> None:
        try:
            await self._store.write(items)
        except StorageFull as e:
            # Retriable: commits must go to this pump, and space may be freed (GC, operator).
            log.error("pump disk is full; %d binlog(s) refused: %s", len(items), e)
            raise WriteRefused(
                Reason.DISK_FULL, f"pump disk is full, nothing stored: {e}", retriable=True
            ) from e
        except StorageError as e:
            log.error("storing %d binlog(s) failed: %s", len(items), e)
            raise WriteRefused(
                Reason.STORAGE, f"storage failed: {e}", retriable=bool(e.retriable)
            ) from e
        self.written += len(items)
        self.last_write = self._monotonic()
