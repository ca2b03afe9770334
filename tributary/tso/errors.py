"""The TSO error root. ``retriable`` tells callers whether asking again may succeed."""

from __future__ import annotations

from tributary.errors import TributaryError


class TsoError(TributaryError):
    """A timestamp could not be obtained."""

    retriable = True


class NotLeader(TsoError):
    """This member does not (or no longer) serve timestamps; ``leader`` names who does."""

    def __init__(self, leader: str | None) -> None:
        where = f"the leader is {leader}" if leader else "no leader is elected yet"
        super().__init__(f"this TSO member is not the leader; {where}", retriable=True)
        self.leader = leader


class LogicalOverflow(TsoError):
    """Every logical value of the current millisecond is spent; wait for the next tick."""

    def __init__(self) -> None:
        super().__init__("logical counter exhausted for this millisecond", retriable=True)
