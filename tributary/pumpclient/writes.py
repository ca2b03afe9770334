"""Retry policies of the pump client: where a binlog goes and how often it
is tried again.

Invariants:
- a P-binlog is re-routed on every attempt (the selector moves on), paused
  ``retry_interval`` between attempts, and given up only once more than
  ``write_timeout`` has passed *and* more attempts were made than there are
  available pumps; then every online pump, usable or not, gets one last try;
- a failure the pump reports as "too large" (RESOURCE_EXHAUSTED) or
  malformed (INVALID_ARGUMENT) is final: raised at once, no other pump tried;
- a refusal that says the pump cannot take prewrites now (``elsewhere``: not
  online, cut from etcd, disk nearly full) moves the P-binlog to the next
  available pump that has not refused it, without the pause, and is counted in
  ``prewrites_redirected``; once every available pump refused it that way,
  the pause and the policy above apply (their state may change);
- a C-binlog stays with the pump of its P-binlog, retried every
  ``10 * retry_interval`` until ``commit_timeout``; it never raises;
- a copy of a C-binlog for a pump that may hold the P-binlog without having
  acknowledged it (``uncertain``: the call broke or timed out) is tried once
  in the caller's call; if that fails it is handed to a background delivery
  that retries it on that pump, whatever its error count or state, until it is
  stored, the pump's record is removed or ``commit_timeout`` passes. A pump
  killed after storing a prewrite and before answering recovers it at restart
  and holds its max commit ts until a C-binlog comes: giving the copy up while
  the pump is merely down would hold it for ``max-txn-timeout`` (or for good);
- after a failed attempt, once the write is decided, pumps past the error
  limit leave the available set (so a pump that is down only briefly is not
  dropped in the middle of one write's retries).

Worked example (pumps a, b, c; a is cut from etcd): P(1) tries a, which
refuses it as not-registered; it goes straight to b (no pause), which stores it.
Had b refused too, c next; had all three, a pause, then a, b, c again.

Worked example (pumps a, b; range; a is down): P(1) tries a, fails
(a.err_num=1), sleeps 0.1 s, tries b, succeeds; pairing records 1 -> b. C(1)
goes straight to b. After eleven such failures a.err_num=11 > 10 and a moves
to the unavailable set, so no write tries it until a probe succeeds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from tributary.pumpclient.clock import Clock
from tributary.pumpclient.errors import PumpClientError, RpcFailure
from tributary.pumpclient.membership import PumpSet
from tributary.pumpclient.pairing import Pairing
from tributary.pumpclient.pump import Pump
from tributary.pumpclient.stats import ClientStats

log = logging.getLogger(__name__)

# Runs a coroutine as a background task owned by the client (a name for the task).
Spawn = Callable[[Coroutine[Any, Any, None], str], None]


class Writes:
    def __init__(
        self,
        pumps: PumpSet,
        pairing: Pairing,
        stats: ClientStats,
        clock: Clock,
        *,
        write_timeout: float,
        commit_timeout: float,
        retry_interval: float,
        spawn: Spawn,
    ) -> None:
        self._pumps = pumps
        self._pairing = pairing
        self._stats = stats
        self._clock = clock
        self._write_timeout = write_timeout
        self._commit_timeout = commit_timeout
        self._retry_interval = retry_interval
        self._spawn = spawn

    @property
    def pending_pairs(self) -> int:
        """P-binlogs whose C-binlog has not been written yet."""
        return len(self._pairing)

    async def prewrite(self, payload: bytes, start_ts: int) -> None:
        started = self._clock.now()
        uncertain: set[str] = set()
        refused: set[str] = set()  # pumps that cannot take prewrites now
        last: RpcFailure | None = None
        attempt = 0
        while (pump := self._select(start_ts, attempt, refused)) is not None:
            try:
                await pump.write(payload)
            except RpcFailure as e:
                last = e
                if e.uncertain:
                    uncertain.add(pump.node_id)
                if e.elsewhere:
                    self._stats.prewrites_redirected += 1
                    refused.add(pump.node_id)
                    if not refused.issuperset(self._pumps.available):
                        log.info(
                            "pump %s cannot take binlog %d now (%s); trying another pump",
                            pump.node_id,
                            start_ts,
                            e,
                        )
                        attempt += 1
                        continue
                    refused.clear()  # every pump refused it: pause, then try them again
                log.warning("write binlog %d to pump %s failed: %s", start_ts, pump.node_id, e)
                if not e.retriable:
                    self._give_up(start_ts, uncertain)
                    raise PumpClientError(
                        f"write binlog failed, the last error {e}",
                        retriable=False,
                        maybe_stored=bool(uncertain),
                    ) from e
            else:
                if last is not None:
                    self._pumps.check_usable()
                self._done(start_ts, pump, uncertain)
                return
            attempt += 1
            elapsed = self._clock.now() - started
            if elapsed > self._write_timeout and attempt > len(self._pumps.available):
                break
            self._stats.retries += 1
            await self._clock.sleep(self._retry_interval)
        self._pumps.check_usable()
        resort = await self._last_resort(payload, start_ts, uncertain)
        if resort is None:
            return
        last = last or resort
        self._give_up(start_ts, uncertain)
        raise PumpClientError(
            f"write binlog failed, the last error {last}", maybe_stored=bool(uncertain)
        ) from last

    def _select(self, start_ts: int, attempt: int, refused: set[str]) -> Pump | None:
        """The selector's pump for this attempt, moving past the pumps in ``refused``
        (unless every available pump is among them)."""
        pump = self._pumps.select(start_ts, attempt)
        for skip in range(1, len(self._pumps.available)):
            if pump is None or pump.node_id not in refused:
                break
            pump = self._pumps.select(start_ts, attempt + skip)
        return pump

    async def _last_resort(
        self, payload: bytes, start_ts: int, uncertain: set[str]
    ) -> RpcFailure | None:
        """Try every online pump once; None on success, else the last failure."""
        last = RpcFailure("no available pump")
        for pump in self._pumps.online():
            try:
                await pump.write(payload)
            except RpcFailure as e:
                last = e
                if e.uncertain:
                    uncertain.add(pump.node_id)
                continue
            self._pumps.set_available(pump, True)
            self._stats.backoff_writes += 1
            self._done(start_ts, pump, uncertain)
            return None
        return last

    def _done(self, start_ts: int, pump: Pump, uncertain: set[str]) -> None:
        self._stats.prewrites_ok += 1
        self._pairing.record(start_ts, pump.node_id, uncertain)

    def _give_up(self, start_ts: int, uncertain: set[str]) -> None:
        self._stats.prewrites_failed += 1
        self._pumps.check_usable()
        self._pairing.record(start_ts, None, uncertain)

    async def commit(self, payload: bytes, start_ts: int) -> None:
        placement = self._pairing.take(start_ts)
        confirmed = placement and placement.confirmed and self._pumps.pumps.get(placement.confirmed)
        if confirmed:
            primary, persistent = [confirmed], True
        elif placement is not None and placement.confirmed is None:
            primary, persistent = [], False  # the prewrite failed; only the extras below
        else:
            self._stats.commits_unmatched += 1
            primary, persistent = list(self._pumps.available.values()), False
            log.warning(
                "binlog %d doesn't have a matched prewrite binlog; sending it to every "
                "available pump (%d)",
                start_ts,
                len(primary),
            )
        extras = [
            self._pumps.pumps[n]
            for n in sorted(placement.uncertain if placement else ())
            if n in self._pumps.pumps and self._pumps.pumps[n] not in primary
        ]
        attempts = [self._commit_to(p, payload, start_ts, persistent) for p in primary]
        attempts += [self._commit_copy(p, payload, start_ts) for p in extras]
        if len(attempts) == 1:  # the common case: no task needed
            results = [await attempts[0]]
        else:
            results = await asyncio.gather(*attempts)
        if all(results[: len(primary)]) and (primary or placement is not None):
            self._stats.commits_ok += 1
        else:
            self._stats.commits_failed += 1
            log.error("commit binlog of txn %d was not written; see the errors above", start_ts)

    async def _commit_copy(self, pump: Pump, payload: bytes, start_ts: int) -> bool:
        """The C-binlog for a pump that may hold the P-binlog: one try now; on a
        retriable failure a background delivery keeps at it (module docstring).
        True: the caller need not wait any longer (stored, or handed over)."""
        try:
            await pump.write(payload)
            return True
        except RpcFailure as e:
            failure = e
        self._pumps.check_usable()
        if not failure.retriable or not self._pumps.is_current(pump):
            log.error(
                "write commit binlog of txn %d to pump %s (which may hold its prewrite) failed: %s",
                start_ts,
                pump.node_id,
                failure,
            )
            return True  # the pump is gone or refuses it for good: nothing to wait for
        log.warning(
            "commit binlog of txn %d to pump %s (which may hold its prewrite) failed: %s; "
            "retrying it in the background",
            start_ts,
            pump.node_id,
            failure,
        )
        self._stats.commits_deferred += 1
        self._spawn(
            self._deliver_late(pump, payload, start_ts),
            f"pumpclient-commit-{start_ts}-{pump.node_id}",
        )
        return True

    async def _deliver_late(self, pump: Pump, payload: bytes, start_ts: int) -> None:
        await self._clock.sleep(self._retry_interval * 10)
        if await self._commit_to(pump, payload, start_ts, True):
            self._stats.commits_late += 1
            log.info("commit binlog of txn %d reached pump %s late", start_ts, pump.node_id)

    async def _commit_to(self, pump: Pump, payload: bytes, start_ts: int, persistent: bool) -> bool:
        """Write to ``pump`` until it works; a non-persistent target is given up
        once it stops being usable."""
        started = self._clock.now()
        while True:
            try:
                await pump.write(payload)
                return True
            except RpcFailure as e:
                failure = e
            self._pumps.check_usable()
            gone = not self._pumps.is_current(pump)
            expired = self._clock.now() - started > self._commit_timeout
            if (
                not failure.retriable
                or gone
                or expired
                or (not persistent and not self._pumps.usable(pump))
            ):
                log.error(
                    "write commit binlog of txn %d to pump %s failed: %s",
                    start_ts,
                    pump.node_id,
                    failure,
                )
                return False
            self._stats.retries += 1
            await self._clock.sleep(self._retry_interval * 10)
