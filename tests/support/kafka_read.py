"""Reading a topic back in tests, as a consumer of committed (or all) records does."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from tests.support.waits import until


async def read_partition(
    bootstrap: str, topic: str, partition: int = 0, *, committed: bool = True
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic``'s ``partition`` up to its end (its last stable offset when
    reading ``committed``: what a ``read_committed`` consumer sees)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    await consumer.start()
    try:
        assert topic in await consumer.topics(), f"no topic {topic}"
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, 0)
        out: list[ConsumerRecord[bytes, bytes]] = []
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            out += [m for m in batch.get(tp, []) if m.offset < end]
        return out
    finally:
        await consumer.stop()


async def read_at_least(
    bootstrap: str, topic: str, count: int, partition: int = 0, within: float = 30.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """``read_partition`` of committed records once it holds ``count`` of them: a commit returns
    before the broker has written its markers, so the records become visible a moment later."""
    got: list[ConsumerRecord[bytes, bytes]] = []

    async def enough() -> bool:
        nonlocal got
        got = await read_partition(bootstrap, topic, partition)
        return len(got) >= count

    await until(enough, within)
    return got
