"""What decides ``RESULT: PASS``: every check of the run, and why it failed if it did.

PASS needs all of: the load ran without a writer failing; the drainer's checkpoint passed the
workload's last commit ts in time; the consistency checker found the downstream equal to the
upstream (every table, every row); and the bank's total is the opening total on both sides
(transfers only move money, so anything else is a lost or half-applied transaction).

Invariant: ``ok`` is True only when ``reasons()`` is empty, and a check that could not run
(a comparison skipped because the drainer never caught up) counts as failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.checker import Report


@dataclass(frozen=True)
class Verdict:
    load_error: str  # "" when every writer finished cleanly
    caught_up: bool
    report: Report | None  # None: the comparison did not run
    check_error: str  # why the comparison (or a total) could not be read, if it could not
    expected_total: int
    upstream_total: int | None
    downstream_total: int | None

    @property
    def totals_ok(self) -> bool:
        return self.upstream_total == self.downstream_total == self.expected_total

    def reasons(self) -> list[str]:
        out = []
        if self.load_error:
            out.append(f"the workload failed ({self.load_error})")
        if not self.caught_up:
            out.append("the drainer did not catch up")
        if self.check_error:
            out.append(self.check_error)
        if self.report is None:
            if self.caught_up and not self.check_error:
                out.append("the comparison did not run")
        elif not self.report.equal:
            differing = sum(not t.equal for t in self.report.tables)
            out.append(f"{differing} of {len(self.report.tables)} tables differ downstream")
        if self.caught_up and not self.check_error and not self.totals_ok:
            out.append(
                f"bank total {self.upstream_total} upstream, {self.downstream_total} downstream, "
                f"opened with {self.expected_total}"
            )
        return out

    @property
    def ok(self) -> bool:
        return not self.reasons()
