"""Where each transaction's P-binlog went, so its C-binlog follows it.

A pump can only pair a commit or rollback with the prewrite it stored itself;
a C-binlog sent elsewhere is skipped there ("Matching P-binlog not found")
and the pump holding the prewrite blocks its sorter until its resolver gives
up on the transaction. Invariant: an entry is created when a P-binlog write
finishes (acknowledged or not) and removed by the first C-binlog for that
start_ts.

Besides the pump that acknowledged the prewrite, an entry remembers the pumps
where an attempt ended without a verdict (deadline, lost connection): they
may hold the prewrite too. Worked example: the prewrite of txn 42 times out
on pump a (which stored it after all) and succeeds on b. The entry is
{confirmed: b, uncertain: {a}}; the commit goes to b (retried until it
succeeds) and to a (retried in the background while a is down, until a takes
it), so a's sorter is not held for max-txn-timeout. The drainer drops the
second copy (equal commit_ts).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Placement:
    confirmed: str | None  # node id of the pump that acknowledged the prewrite
    uncertain: set[str] = field(default_factory=set)  # pumps that may hold it too


class Pairing:
    def __init__(self) -> None:
        self._by_start_ts: dict[int, Placement] = {}

    def record(self, start_ts: int, confirmed: str | None, uncertain: set[str]) -> None:
        uncertain = uncertain - {confirmed} if confirmed else set(uncertain)
        if confirmed is None and not uncertain:
            return  # the prewrite is certainly nowhere: nothing to follow
        self._by_start_ts[start_ts] = Placement(confirmed, uncertain)

    def take(self, start_ts: int) -> Placement | None:
        return self._by_start_ts.pop(start_ts, None)

    def __len__(self) -> int:
        return len(self._by_start_ts)
