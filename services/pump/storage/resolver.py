"""The port that settles a prewrite whose commit/rollback never arrived.

tidb-binlog asks TiKV (MVCC record of the primary key, then the lock's status): a
transaction still locked keeps waiting, one whose lock is gone without a commit is
rolled back. Here the pump has no TiKV to ask, so it cannot know whether the writer
is gone or only slow, and a rollback it guesses drops a transaction that may still
commit upstream. Hence two built-in answers, chosen by ``[storage]
stuck-prewrite-action``:

- :class:`WaitResolver` (``wait``, the default): the transaction is still running;
  the pump keeps the prewrite, keeps its max commit ts below it (replication stalls
  behind it, nothing is lost) and alerts (``Upkeep`` logs an ERROR naming the start
  ts, the ``stuck_prewrites`` gauge, ``/status`` and ``binlogctl pumps`` list it);
- :class:`RollbackResolver` (``rollback``, the behaviour before): declare it rolled
  back; a commit arriving later finds no prewrite to pair with.

Invariant: a resolver is only consulted for a prewrite that has waited longer than
``max_txn_timeout`` (TSO physical time), and every rollback is counted and logged at
ERROR with its start_ts.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    RUNNING = "running"


@dataclass(frozen=True, slots=True)
class Resolution:
    outcome: Outcome
    commit_ts: int = 0
    """Set when ``outcome`` is COMMITTED."""

    @classmethod
    def committed(cls, commit_ts: int) -> Resolution:
        return cls(Outcome.COMMITTED, commit_ts)

    @classmethod
    def rolled_back(cls) -> Resolution:
        return cls(Outcome.ROLLED_BACK)

    @classmethod
    def running(cls) -> Resolution:
        return cls(Outcome.RUNNING)


class Resolver(Protocol):
    async def resolve(self, start_ts: int) -> Resolution:
        """What became of the transaction that started at ``start_ts``."""
        ...


class WaitResolver:
    """Never settles: a prewrite without its commit waits (and is reported) until it comes."""

    async def resolve(self, start_ts: int) -> Resolution:
        return Resolution.running()


class RollbackResolver:
    """Treats every timed-out transaction as rolled back (there is no TiKV to ask)."""

    def __init__(self) -> None:
        self.rolled_back = 0

    async def resolve(self, start_ts: int) -> Resolution:
        self.rolled_back += 1
        log.error(
            "prewrite start_ts=%d got no commit/rollback within max-txn-timeout; rolling it "
            "back (stuck-prewrite-action=rollback): its transaction will not replicate",
            start_ts,
        )
        return Resolution.rolled_back()
