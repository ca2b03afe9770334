"""Counters of a workload run, and what the latency benchmark records per transaction."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Committed:
    """One committed transaction: its commit ts and the wall time (s since the epoch) taken
    right after the upstream COMMIT returned."""

    commit_ts: int
    committed_at: float


@dataclass(slots=True)
class WorkloadStats:
    """Only growing. ``commits`` counts transactions committed upstream whose commit binlog was
    handed to the pump client; ``rollbacks`` those whose prewrite was written and that then
    failed (a rollback binlog was written); ``retries`` transactions run again as new ones after
    a conflict (deadlock, lock wait timeout, duplicate key) or a lost connection; ``failures``
    transactions given up; ``aborted`` plans dropped because a DDL changed their table."""

    commits: int = 0
    rollbacks: int = 0
    retries: int = 0
    failures: int = 0
    aborted: int = 0
    ddls: int = 0
    rows: int = 0
    max_commit_ts: int = 0  # highest commit ts written (DML or DDL)
    latencies: list[Committed] = field(default_factory=list)  # when recording was asked for

    def as_dict(self) -> dict[str, int]:
        return {
            "commits": self.commits,
            "rollbacks": self.rollbacks,
            "retries": self.retries,
            "failures": self.failures,
            "aborted": self.aborted,
            "ddls": self.ddls,
            "rows": self.rows,
            "max_commit_ts": self.max_commit_ts,
        }
