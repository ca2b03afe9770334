"""What runs beside the load for the whole run: a reader of the downstream bank and a TSO prober.

``BankReader`` samples ``COUNT(*)`` and ``SUM(balance)`` of the downstream accounts in one
statement (one InnoDB snapshot). Once every account is there, a total other than the bank's
invariant means part of a transaction was visible: a half transaction. ``TsoProbe`` asks the TSO
for a timestamp again and again, each call starting after the previous returned, so each answer
must be larger than the last (also across leader changes); one that is not is a regression. The
longest wait for an answer says how long the cluster had no clock (every writer stalls then).
``TsoLeaders`` asks every pump's TSO member directly, one after the other, round after round:
only the leader answers, so two members answering in one short round (under
``OVERLAP_WINDOW``; a handover waits for the old leader's 3 s lease) are two leaders at once,
and each answer must be larger than every answer before it, whoever gave it.
All ride out the faults: an error or a hang (a SIGSTOPped server) is a skipped sample.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.exceptions import StreamTerminatedError

from services.demo.cluster import DemoCluster
from tests.support.mariadb import MariaDBServer
from tributary.tso.client import Tso
from tributary.wire.binlogext import TsoRequest, TsoStub

log = logging.getLogger(__name__)

SAMPLE_TIMEOUT = 2.0  # seconds one sample may take before it is given up
OVERLAP_WINDOW = 0.5  # seconds: a round shorter than this has no room for a handover


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


@dataclass
class TsoLeaders:
    cluster: DemoCluster
    cluster_id: int
    interval: float = 0.25
    rounds: int = 0
    answers: int = 0
    last: int = 0
    overlaps: list[str] = field(default_factory=list)  # rounds where two members answered
    regressions: list[tuple[str, int, int]] = field(default_factory=list)  # (who, last, given)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        channels: dict[str, Channel] = {}
        try:
            while True:
                await asyncio.sleep(self.interval)
                began = loop.time()
                served = []
                for pump in list(self.cluster.pumps):
                    if pump.addr not in channels:
                        host, port = pump.addr.rsplit(":", 1)
                        channels[pump.addr] = Channel(host, int(port))
                    ts = await self._ask(channels[pump.addr])
                    if ts is None:
                        continue
                    served.append(pump.name)
                    self.answers += 1
                    if ts <= self.last:
                        log.error("TSO member %s answered %d after %d", pump.name, ts, self.last)
                        self.regressions.append((pump.name, self.last, ts))
                    self.last = max(self.last, ts)
                self.rounds += 1
                took = loop.time() - began
                if len(served) > 1 and took < OVERLAP_WINDOW:
                    log.error("two TSO leaders in one %.2f s round: %s", took, served)
                    self.overlaps.append(f"{served} in {took:.2f} s")
        finally:
            for ch in channels.values():
                ch.close()

    async def _ask(self, channel: Channel) -> int | None:
        try:
            reply = await TsoStub(channel).get_timestamps(
                TsoRequest(cluster_id=self.cluster_id, count=1), timeout=1
            )
        except (GRPCError, StreamTerminatedError, OSError, TimeoutError):
            return None  # not the leader, down, frozen or cut
        return int(reply.last)
