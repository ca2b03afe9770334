"""The Kafka fixture runs a real KRaft broker: produce/consume, restart after SIGKILL keeps data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

if TYPE_CHECKING:
    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]


async def _consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        got: list[bytes] = []
        while len(got) < count:
            batch = await consumer.getmany(timeout_ms=1000)
            got += [m.value for msgs in batch.values() for m in msgs if m.value is not None]
        return got
    finally:
        await consumer.stop()


async def test_produce_consume_and_survive_sigkill(kafka: KafkaBroker) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        for i in range(3):
            await producer.send_and_wait("t", f"m{i}".encode(), partition=0)
    finally:
        await producer.stop()
    kafka.restart()  # SIGKILL, then start on the same data and ports
    assert await _consume_all(kafka.bootstrap, "t", 3) == [b"m0", b"m1", b"m2"]
