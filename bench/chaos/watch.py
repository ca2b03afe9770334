"""What runs beside the load for the whole run: a reader of the downstream bank and a TSO prober.

``BankReader`` samples ``COUNT(*)`` and ``SUM(balance)`` of the downstream accounts in one
statement (one InnoDB snapshot). Once every account is there, a total other than the bank's
invariant means part of a transaction was visible: a half transaction. ``TsoProbe`` asks the TSO
for a timestamp again and again, each call starting after the previous returned, so each answer
must be larger than the last (also across leader changes); one that is not is a regression. The
longest wait for an answer says how long the cluster had no clock (every writer stalls then).
Both ride out the faults: an error or a hang (a SIGSTOPped server) is a skipped sample.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from tests.support.mariadb import MariaDBServer
from tributary.tso.client import Tso

log = logging.getLogger(__name__)

SAMPLE_TIMEOUT = 2.0  # seconds one sample may take before it is given up


@dataclass
class BankReader:
    server: MariaDBServer
    accounts: int
    expected: int
    schema: str = "bank"
    interval: float = 0.1
    samples: int = 0
    complete: int = 0  # samples that saw every account
    half: list[int] = field(default_factory=list)  # totals seen that were not ``expected``

    async def run(self) -> None:
        sql = f"SELECT COUNT(*), COALESCE(SUM(balance), 0) FROM `{self.schema}`.accounts"
        while True:
            await asyncio.sleep(self.interval)
            try:
                async with asyncio.timeout(SAMPLE_TIMEOUT):
                    rows = await self.server.query(sql)
            except Exception:  # down, stopped, or the table is not there yet
                continue
            self.samples += 1
            count, total = int(rows[0][0]), int(rows[0][1])
            if count != self.accounts:
                continue
            self.complete += 1
            if total != self.expected:
                log.error(
                    "half transaction visible downstream: total %d != %d", total, self.expected
                )
                self.half.append(total)


@dataclass
class TsoProbe:
    tso: Tso
    interval: float = 0.05
    calls: int = 0
    last: int = 0
    regressions: list[tuple[int, int]] = field(default_factory=list)  # (previous, returned)
    max_gap_s: float = 0.0  # longest time without a timestamp (no leader, no quorum, ...)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        answered = loop.time()
        while True:
            await asyncio.sleep(self.interval)
            try:
                ts = await self.tso.get_ts()
            except Exception as e:  # no leader for a moment: the next call retries
                log.debug("TSO probe: %r", e)
                continue
            self.calls += 1
            now = loop.time()
            self.max_gap_s, answered = max(self.max_gap_s, now - answered), now
            if ts <= self.last:
                log.error("TSO went backwards: %d after %d", ts, self.last)
                self.regressions.append((self.last, ts))
            self.last = max(self.last, ts)
