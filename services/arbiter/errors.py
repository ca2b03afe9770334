"""The arbiter's errors: all ``TributaryError``s, so the CLI reports them and exits 1."""

from __future__ import annotations

from tributary.errors import TributaryError


class ArbiterError(TributaryError):
    """The arbiter cannot go on; the message says what and where."""


class MalformedMessage(ArbiterError):
    """A message of the topic is not a secondary binlog: named by topic, partition and offset."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            f"malformed message in topic {topic!r} partition {partition} at offset {offset}: "
            f"{reason}; nothing from this offset on was applied (set [up] skip-malformed = true "
            "to skip such messages)"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
