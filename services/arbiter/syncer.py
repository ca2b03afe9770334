"""The arbiter's loop: messages in offset order -> transactions -> the sink -> the checkpoint.

Each round takes the messages that are there (up to ``MAX_BATCH``), decodes them, drops those
whose commit ts is not above the last one taken (a drainer that resent after a restart repeats
transactions; tidb-binlog's arbiter skips them the same way), applies the rest as one sink batch
and then saves ``(ts, status 1, next offset)``. Example: offsets 7..10 hold ts 50 60 60 70 and the
last applied ts is 50: the batch is [60, 70], the checkpoint becomes (70, 1, 11).

A message that is not a secondary binlog stops the loop after what came before it is applied and
checkpointed with the malformed message's offset as the next one, so a restart (once the topic
is fixed, or with ``skip_malformed``) resumes exactly there; with ``skip_malformed`` it is logged,
counted and passed over. A retriable sink error retries the same batch (the sink drops what it
already holds); another one stops the arbiter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.arbiter.checkpoint import STATUS_RUNNING, ArbiterCheckpoint, CheckpointStore
from services.arbiter.errors import MalformedMessage
from tributary.change import Txn
from tributary.errors import TributaryError
from tributary.sinks import Sink, SinkError
from tributary.sinks.kafka.secondary import decode_txn

log = logging.getLogger(__name__)

MAX_BATCH = 512  # messages per sink batch
FETCH_WAIT = 0.5  # seconds a fetch waits for messages
RETRY_FIRST, RETRY_MAX = 0.2, 5.0  # backoff of a retriable sink error, seconds


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    value: bytes | None


class Source(Protocol):
    topic: str

    async def fetch(self, max_records: int, wait: float) -> list[Record]: ...


class Observer(Protocol):
    """What the metrics see: each applied batch and each skipped message."""

    def applied(self, txns: Sequence[Txn], seconds: float) -> None: ...

    def skipped(self) -> None: ...


def decode(topic: str, partition: int, offset: int, value: bytes | None) -> Txn:
    """The transaction of one message, or MalformedMessage naming where it is."""
    if value is None:
        raise MalformedMessage(topic, partition, offset, "no value (a tombstone)")
    try:
        return decode_txn(value)
    except (SinkError, ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        raise MalformedMessage(topic, partition, offset, str(e)) from e


class Syncer:
    def __init__(
        self,
        source: Source,
        sink: Sink,
        store: CheckpointStore,
        *,
        last_ts: int,
        next_offset: int,
        partition: int = 0,
        skip_malformed: bool = False,
        observer: Observer | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._source = source
        self._sink = sink
        self._store = store
        self.last_ts = last_ts  # the commit ts of the last transaction applied
        self.next_offset = next_offset  # the offset of the next message to read
        self._partition = partition
        self._skip = skip_malformed
        self._observer = observer
        self._sleep = sleep

    @property
    def checkpoint(self) -> ArbiterCheckpoint:
        return ArbiterCheckpoint(self.last_ts, STATUS_RUNNING, self.next_offset)

    async def run(self, stop: asyncio.Event) -> None:
        """Apply until ``stop`` is set (the batch in hand is finished first)."""
        while not stop.is_set():
            await self.step()

    async def step(self) -> int:
        """One round; the number of messages read."""
        records = await self._source.fetch(MAX_BATCH, FETCH_WAIT)
        if not records:
            return 0
        txns: list[Txn] = []
        last = self.last_ts
        bad: MalformedMessage | None = None
        end = records[-1].offset + 1
        for r in records:
            try:
                txn = decode(self._source.topic, self._partition, r.offset, r.value)
            except MalformedMessage as e:
                if not self._skip:
                    bad, end = e, r.offset
                    break
                log.error("skipping %s", e)
                if self._observer is not None:
                    self._observer.skipped()
                continue
            if txn.commit_ts <= last:
                log.info("skip repeated binlog ts %d at offset %d", txn.commit_ts, r.offset)
                continue
            txns.append(txn)
            last = txn.commit_ts
        await self._apply(txns)
        self.last_ts, self.next_offset = last, end
        await self._store.save(self.checkpoint)
        if bad is not None:
            raise bad
        return len(records)

    async def _apply(self, txns: list[Txn]) -> None:
        if not txns:
            return
        delay = RETRY_FIRST
        while True:
            began = time.monotonic()
            try:
                await self._sink.apply(txns)
            except TributaryError as e:
                if not e.retriable:
                    raise
                log.warning(
                    "applying ts %d..%d failed, retrying: %s",
                    txns[0].commit_ts,
                    txns[-1].commit_ts,
                    e,
                )
                await self._sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            if self._observer is not None:
                self._observer.applied(txns, time.monotonic() - began)
            return
