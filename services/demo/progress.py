"""The numbers on the demo's progress lines, computed without I/O so they can be tested.

Lag is the drainer's distance from now: the wall-clock time minus the physical part of its
saved checkpoint (``GET /commit_ts``). It is unknown ("-") until the checkpoint has moved past
the commit ts the drainer was started after: before that it has replicated nothing of the
demo. Example: started after ts ``compose(1_700_000_000_000, 0)``; at wall time
1_700_000_012.5 s the checkpoint is ``compose(1_700_000_011_750, 3)``, so the lag is 0.75 s.
The applied count is the drainer's ``binlog_drainer_applied_binlog_count`` metric: upstream
transactions and DDLs the downstream accepted.

Invariant: a lag is never negative (the TSO's clock may run a little ahead of this one).
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.wire.ts import physical_ms

APPLIED_METRIC = "binlog_drainer_applied_binlog_count"


@dataclass(frozen=True, slots=True)
class Counts:
    """The workload's counters summed over bank and mixed (only growing)."""

    commits: int = 0
    ddls: int = 0
    rows: int = 0

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.commits - other.commits, self.ddls - other.ddls, self.rows - other.rows)


@dataclass(frozen=True, slots=True)
class DrainerSample:
    """One look at the drainer; None where it did not answer."""

    checkpoint_ts: int | None = None
    applied: int | None = None


def lag_seconds(checkpoint_ts: int | None, now: float, started_after: int = 0) -> float | None:
    """Seconds from the checkpoint's physical time to ``now`` (s since the epoch); None while
    there is no checkpoint past ``started_after``."""
    if checkpoint_ts is None or checkpoint_ts <= started_after:
        return None
    return max(0.0, now - physical_ms(checkpoint_ts) / 1000)


def parse_applied(metrics_text: str) -> int | None:
    """The applied-binlog count from a Prometheus text page; None if it is not there."""
    for line in metrics_text.splitlines():
        name, _, value = line.partition(" ")
        if name == APPLIED_METRIC:
            try:
                return int(float(value))
            except ValueError:
                return None
    return None


def rate(done: int, seconds: float) -> float:
    """Per second, 0 for an empty interval."""
    return done / seconds if seconds > 0 else 0.0


HEADER = f"{'load':>6}{'txn/s':>9}{'commits':>10}{'DDLs':>7}   drainer:{'applied':>9}{'lag':>9}"


def progress_line(
    second: int, per_second: float, load: Counts, applied: int | None, lag: float | None
) -> str:
    """One line under :data:`HEADER`; ``load`` counts since the writers started."""
    shown_applied = "-" if applied is None else str(applied)
    shown_lag = "-" if lag is None else f"{lag:.1f} s"
    return (
        f"{second:>5}s{per_second:>9.0f}{load.commits:>10}{load.ddls:>7}"
        f"   {'':>8}{shown_applied:>9}{shown_lag:>9}"
    )
