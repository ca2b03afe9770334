"""The error of a message the broker refused as too large, shared by the drainer's two Kafka sinks
(at-least-once and exactly-once): it names the transaction or the record batch and the settings
that would let it through."""

from __future__ import annotations

from collections.abc import Sequence

from tributary.change import Txn
from tributary.sinks.kafka.options import KafkaSettings
from tributary.sinks.kafka.routing import Message
from tributary.sinks.port import SinkError


def too_large(
    settings: KafkaSettings,
    txn: Txn,
    value: bytes,
    e: BaseException,
    batch: Sequence[Message] = (),
) -> SinkError:
    """The error for a message (or the record batch holding it, ``batch``) the broker refused as
    too large."""
    if len(batch) > 1:
        return SinkError(
            f"kafka sink: a record batch of {len(batch)} messages (txns {batch[0].txn.commit_ts} "
            f"to {batch[-1].txn.commit_ts}, {sum(len(m.value) for m in batch)} bytes) is over the "
            f"message size limit of topic {settings.topic} (lower kafka-batch-size, now "
            f"{settings.record_batch_size}, or raise the broker's message.max.bytes or the "
            f"topic's max.message.bytes): {e!r}"
        )
    return SinkError(
        f"kafka sink: the message of txn {txn.commit_ts} (start ts {txn.start_ts}, "
        f"{len(txn.rows)} row changes) is {len(value)} bytes, over the message size limit of "
        f"topic {settings.topic} (raise the broker's message.max.bytes or the topic's "
        f"max.message.bytes, and kafka-max-message-size): {e!r}"
    )
