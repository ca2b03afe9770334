"""The arbiter's loop: messages in commit-ts order -> transactions -> the sink -> the checkpoint.

Each round takes the messages that are there (up to ``MAX_BATCH``, from ``merge``: every
partition, a whole commit ts at a time), decodes them, joins the parts of one transaction
(messages with the same commit ts and different contents: the drainer's per-partition or per-row
messages; a DDL, sent to every partition, is kept once), drops those whose commit ts is not above
the last one taken (a drainer that resent after a restart repeats transactions; tidb-binlog's
arbiter skips them the same way), applies the rest as one sink batch and then saves ``(ts,
status 1, next offset)``; the next offset is kept for a topic of one partition only (with more,
a start finds each partition's place from the ts). Example: offsets 7..10 of partition 0 hold ts
50 60 60 70, the second 60 a resend of the first, and the last applied ts is 50: the batch is
[60, 70], the checkpoint becomes (70, 1, 11). ``run`` fetches (and the merge decodes) the next
round's messages while a round is applied, so the arbiter's work overlaps the downstream's.

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
from dataclasses import dataclass, replace
from typing import Protocol

from services.arbiter.checkpoint import STATUS_RUNNING, ArbiterCheckpoint, CheckpointStore
from services.arbiter.errors import MalformedMessage
from tributary.change import RowChange, Txn
from tributary.errors import TributaryError
from tributary.sinks import Sink, SinkError
from tributary.sinks.kafka.secondary_read import decode_txn

log = logging.getLogger(__name__)

MAX_BATCH = 512  # messages per sink batch
FETCH_WAIT = 0.5  # seconds a fetch waits for messages
RETRY_FIRST, RETRY_MAX = 0.2, 5.0  # backoff of a retriable sink error, seconds


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    value: bytes | None
    partition: int = 0
    txn: Txn | None = None  # the message decoded, when the source already did (the merge)


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
        partition: int | None = 0,
        skip_malformed: bool = False,
        observer: Observer | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._source = source
        self._sink = sink
        self._store = store
        self.last_ts = last_ts  # the commit ts of the last transaction applied
        self.next_offset = next_offset  # the offset of the next message to read
        self._partition = partition  # None: several partitions, no single next offset
        self._skip = skip_malformed
        self._observer = observer
        self._sleep = sleep

    @property
    def checkpoint(self) -> ArbiterCheckpoint:
        return ArbiterCheckpoint(self.last_ts, STATUS_RUNNING, self.next_offset)

    async def run(self, stop: asyncio.Event) -> None:
        """Apply until ``stop`` is set (the batch in hand is finished first).

        The next messages are fetched (and, by the merge, decoded) while a batch is applied and
        checkpointed, one fetch ahead: the downstream's work and the arbiter's overlap. What
        that fetch got is dropped when the loop ends (a stop, an error); the checkpoint never
        covers it, so a start reads it again."""
        ahead: asyncio.Task[list[Record]] | None = None
        try:
            while not stop.is_set():
                records = await ahead if ahead is not None else await self._fetch()
                ahead = None
                if records:
                    ahead = asyncio.create_task(self._fetch(), name="arbiter-fetch-ahead")
                    await self._take(records)
        finally:
            if ahead is not None:
                ahead.cancel()
                await asyncio.gather(ahead, return_exceptions=True)

    async def step(self) -> int:
        """One round; the number of messages read."""
        records = await self._fetch()
        if records:
            await self._take(records)
        return len(records)

    async def _fetch(self) -> list[Record]:
        return await self._source.fetch(MAX_BATCH, FETCH_WAIT)

    async def _take(self, records: list[Record]) -> None:
        """Decode, join, drop repeats, apply, checkpoint."""
        txns: list[Txn] = []
        last = self.last_ts
        bad: MalformedMessage | None = None
        end = records[-1].offset + 1
        taken: set[bytes | None] = set()  # the messages at the ts ``last`` taken in this round
        parts: dict[int, list[RowChange]] = {}  # txns[i]: the rows of its later parts
        for r in records:
            try:
                txn = r.txn
                if txn is None:
                    txn = decode(self._source.topic, r.partition, r.offset, r.value)
            except MalformedMessage as e:
                if not self._skip:
                    bad, end = e, r.offset
                    break
                log.error("skipping %s", e)
                if self._observer is not None:
                    self._observer.skipped()
                continue
            if txns and txn.commit_ts == last and r.value not in taken:
                taken.add(r.value)  # another part of the same transaction: join it
                if txn.ddl is None and txns[-1].ddl is None:
                    parts.setdefault(len(txns) - 1, []).extend(txn.rows)
                continue  # a DDL is on every partition: once is enough
            if txn.commit_ts <= last:
                log.info(
                    "skip repeated binlog ts %d at partition %d offset %d",
                    txn.commit_ts,
                    r.partition,
                    r.offset,
                )
                continue
            txns.append(txn)
            last = txn.commit_ts
            taken = {r.value}
        for i, rows in parts.items():  # joined once: per-row messages would be quadratic
            txns[i] = replace(txns[i], rows=txns[i].rows + tuple(rows))
        await self._apply(txns)
        self.last_ts = last
        if self._partition is not None:
            self.next_offset = end
        await self._store.save(self.checkpoint)
        if bad is not None:
            raise bad

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
