"""The Kafka edge: every partition of the topic, read committed, from given offsets (aiokafka).

``TopicReader`` hands out batches of ``(partition, offset, value)``, each partition in offset
order (``merge`` puts the partitions together by commit ts), and finds where to start:
``offset_after(ts, partition)`` is the offset of the first message of a partition whose commit
ts is above ``ts``, by a binary search over the partition (tidb-binlog's driver reader seeks the
same way), for a start with no stored offset. A drainer in tidb-binlog's layout writes only
partition 0; with ``kafka-partition-by`` it writes them all. Messages of aborted Kafka
transactions are never seen (``isolation_level = read_committed``): a drainer writing in
transactions is read exactly once.

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
    def __init__(self, consumer: AIOKafkaConsumer, topic: str, partitions: list[int]) -> None:
        self._consumer = consumer
        self.topic = topic
        self.tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        self.tp = self.tps[0]

    @property
    def partitions(self) -> list[int]:
        return [tp.partition for tp in self.tps]

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
            consumer.assign([TopicPartition(topic, PARTITION)])  # tracks the topic's metadata
            while not (parts := consumer.partitions_for_topic(topic)):
                if asyncio.get_running_loop().time() > deadline:
                    raise ArbiterError(f"no partitions of topic {topic!r} known after {wait} s")
                await asyncio.sleep(0.1)
            reader = cls(consumer, topic, sorted(parts))
            consumer.assign(reader.tps)
        except BaseException:
            await consumer.stop()
            raise
        return reader

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    async def bounds(self, partition: int = PARTITION) -> tuple[int, int]:
        """(first offset held, offset after the last committed message) of a partition."""
        tp = self._tp(partition)
        begin = (await self._consumer.beginning_offsets([tp]))[tp]
        end = (await self._consumer.end_offsets([tp]))[tp]
        return begin, end

    async def ends(self) -> dict[int, int]:
        """Each partition's offset after its last committed message."""
        got = await self._consumer.end_offsets(self.tps)
        return {tp.partition: offset for tp, offset in got.items()}

    async def position(self, partition: int) -> int:
        offset: int = await self._consumer.position(self._tp(partition))
        return offset

    async def seek(self, offset: int, partition: int = PARTITION) -> None:
        begin, end = await self.bounds(partition)
        if not begin <= offset <= end:
            raise ArbiterError(
                f"topic {self.topic!r} partition {partition} holds offsets {begin}..{end}, not "
                f"the checkpoint's {offset}: messages were deleted (retention) or the topic was "
                "recreated; set [up] initial-commit-ts and clear tidb_binlog.arbiter_checkpoint "
                "to start over"
            )
        self._consumer.seek(self._tp(partition), offset)

    async def fetch(
        self, max_records: int, wait: float, partition: int | None = None
    ) -> list[Record]:
        """The next messages of every partition, or of one (possibly none after ``wait``)."""
        tps = self.tps if partition is None else [self._tp(partition)]
        try:
            got = await self._consumer.getmany(
                *tps, timeout_ms=int(wait * 1000), max_records=max_records
            )
        except KafkaError as e:
            raise ArbiterError(
                f"cannot read topic {self.topic!r}: {e!r}",
                retriable=bool(getattr(e, "retriable", False)),
            ) from e
        return [Record(m.offset, m.value, tp.partition) for tp in tps for m in got.get(tp, [])]

    async def offset_after(
        self, ts: int, commit_ts: Callable[[int, bytes | None], int], partition: int = PARTITION
    ) -> int:
        """The offset of the first message of ``partition`` with a commit ts above ``ts`` (the
        end if none).

        Binary search: commit ts grow with the offset in a drainer's topic (a resent message
        repeats an older ts, which only moves the answer earlier: harmless, it is dropped).
        ``commit_ts(offset, value)`` decodes a message or raises for a malformed one.
        """
        lo, hi = await self.bounds(partition)
        while lo < hi:
            mid = (lo + hi) // 2
            self._consumer.seek(self._tp(partition), mid)
            records = await self.fetch(1, 10.0, partition)
            if not records or records[0].offset >= hi:
                hi = mid
            elif commit_ts(records[0].offset, records[0].value) > ts:
                hi = mid
            else:
                lo = records[0].offset + 1
        return lo

    async def close(self) -> None:
        await self._consumer.stop()
