"""The port that settles a prewrite whose commit/rollback never arrived.

tidb-binlog asks TiKV (MVCC record of the primary key, then the lock's status).
Here the pump has no TiKV to ask, so the built-in :class:`RollbackResolver`
declares the transaction rolled back. Invariant: it is only consulted for a
prewrite that has waited longer than ``max_txn_timeout`` (TSO physical time),
and every such rollback is counted and logged with its start_ts.
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


class RollbackResolver:
    """Treats every timed-out transaction as rolled back (there is no TiKV to ask)."""

    def __init__(self) -> None:
        self.rolled_back = 0

    async def resolve(self, start_ts: int) -> Resolution:
        self.rolled_back += 1
        log.warning(
            "prewrite start_ts=%d got no commit/rollback within the txn timeout; "
            "treating it as rolled back",
            start_ts,
        )
        return Resolution.rolled_back()
