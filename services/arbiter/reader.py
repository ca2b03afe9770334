"""The Kafka edge: partition 0 of the topic, read committed, from a given offset (aiokafka).

``TopicReader`` hands out batches of ``(offset, value)`` in offset order and finds where to start:
``offset_after(ts)`` is the offset of the first message whose commit ts is above ``ts``, by a
binary search over the partition (tidb-binlog's driver reader seeks the same way), for a start
with no stored offset. Messages of aborted Kafka transactions are never seen
(``isolation_level = read_committed``): a drainer writing in transactions is read exactly once.

Invariant: no offset is skipped silently. A stored offset the topic no longer holds (deleted by
retention, or a recreated topic) is an ArbiterError, not a jump to the earliest or latest one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from services.arbiter.errors import ArbiterError
from services.arbiter.syncer import Record

log = logging.getLogger(__name__)

PARTITION = 0
CLIENT_ID = "tidb_binlog_arbiter"


class TopicReader:
    def __init__(self, consumer: AIOKafkaConsumer, topic: str) -> None:
        self._consumer = consumer
        self.topic = topic
        self.tp = TopicPartition(topic, PARTITION)

    @classmethod
    async def open(
        cls, brokers: tuple[str, ...], topic: str, max_message_size: int, *, wait: float = 60.0
    ) -> TopicReader:
        """Connect and wait up to ``wait`` seconds for the topic to exist."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=list(brokers),
            client_id=CLIENT_ID,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="none",
            max_partition_fetch_bytes=max_message_size,
            fetch_max_bytes=max_message_size,
        )
        try:
            await consumer.start()
        except KafkaError as e:
            await consumer.stop()
            raise ArbiterError(f"cannot reach the brokers {','.join(brokers)}: {e!r}") from e
        try:
            deadline = asyncio.get_running_loop().time() + wait
            while topic not in await consumer.topics():
                if asyncio.get_running_loop().time() > deadline:
                    raise ArbiterError(f"topic {topic!r} does not exist on {','.join(brokers)}")
                log.info("waiting for topic %s to exist", topic)
                await asyncio.sleep(1.0)
            reader = cls(consumer, topic)
            consumer.assign([reader.tp])
        except BaseException:
            await consumer.stop()
            raise
        return reader

    async def bounds(self) -> tuple[int, int]:
        """(first offset held, offset after the last committed message)."""
        tp = self.tp
        begin = (await self._consumer.beginning_offsets([tp]))[tp]
        end = (await self._consumer.end_offsets([tp]))[tp]
        return begin, end

    async def seek(self, offset: int) -> None:
        begin, end = await self.bounds()
        if not begin <= offset <= end:
            raise ArbiterError(
                f"topic {self.topic!r} partition {PARTITION} holds offsets {begin}..{end}, not "
                f"the checkpoint's {offset}: messages were deleted (retention) or the topic was "
                "recreated; set [up] initial-commit-ts and clear tidb_binlog.arbiter_checkpoint "
                "to start over"
            )
        self._consumer.seek(self.tp, offset)

    async def fetch(self, max_records: int, wait: float) -> list[Record]:
        """The next messages (possibly none after ``wait`` seconds)."""
        try:
            got = await self._consumer.getmany(
                self.tp, timeout_ms=int(wait * 1000), max_records=max_records
            )
        except KafkaError as e:
            raise ArbiterError(
                f"cannot read topic {self.topic!r} partition {PARTITION}: {e!r}",
                retriable=bool(getattr(e, "retriable", False)),
            ) from e
        return [Record(m.offset, m.value) for m in got.get(self.tp, [])]

    async def offset_after(self, ts: int, commit_ts: Callable[[int, bytes | None], int]) -> int:
        """The offset of the first message with a commit ts above ``ts`` (the end if none).

        Binary search: commit ts grow with the offset in a drainer's topic (a resent message
        repeats an older ts, which only moves the answer earlier: harmless, it is dropped).
        ``commit_ts(offset, value)`` decodes a message or raises for a malformed one.
        """
        lo, hi = await self.bounds()
        while lo < hi:
            mid = (lo + hi) // 2
            self._consumer.seek(self.tp, mid)
            records = await self.fetch(1, 10.0)
            if not records or records[0].offset >= hi:
                hi = mid
            elif commit_ts(records[0].offset, records[0].value) > ts:
                hi = mid
            else:
                lo = records[0].offset + 1
        return lo

    async def close(self) -> None:
        await self._consumer.stop()
