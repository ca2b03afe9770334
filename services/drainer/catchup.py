"""Spark catch-up of a backlog: when to start one, staging a range, running the job.

The syncer asks ``should_start(txn)`` for every converted transaction (an operator's ``PUT
/catchup``; the transaction is ``lag-threshold`` seconds behind the wall clock; or the last
measured backlog is ``backlog-threshold`` binlogs or more). It then
lets the apply buffer drain, so the sink checkpoint ``S`` is the range start, and hands the
stream to ``stage``, which writes transactions into a ``StagingWriter`` until the range ends:

* a DDL, or rows of a table without a primary key (the job compacts by key): that
  transaction is held back and streamed after the range;
* a late transaction (its schema version below the newest seen: TiDB's metadata lock lets a
  transaction that started before a DDL commit after it), or rows of a table under another
  definition than the one staged: held back too, so the sink applies them with their own
  columns (the job would write a whole row: REPLACE would reset a column the DDL added);
* one less than ``resume-lag`` seconds behind (caught up): held back too;
* ``max-range-rows`` row changes staged, or no binlog for ``idle`` seconds.

``execute`` runs the job (``catchup_job``) on the closed range ``(S, E]``. Progress: while
staging, the rows staged and their rate are logged every ``LOG_EVERY`` seconds (the total is
not known before the range ends); while the job runs, its rows lines (``services.spark.
progress``: rows done of the staged rows, rate, ETA) are ``job`` in ``/status`` and logged:
the first, then as often, and the one that reaches the total. Only after exit 0
does the syncer move the checkpoint to ``E``, by applying a checkpoint-only marker ``Txn(E)``
through the sink (its checkpoint moves in its own transaction; the savepoint file follows),
then it streams from the held-back transaction on. Worked example: checkpoint 100, backlog
T110 T120(DDL) ...: drain (sink at 100), stage T110, T120 ends the range -> job on (100, 110]
-> marker 110 applied -> T120 streamed.

The backlog in binlogs is measured outside the hot path: ``measure_backlog`` (a task of the
composition root) asks a ``BacklogCounter`` every ``backlog-interval`` seconds how many
binlogs the pumps hold above the drainer's position and records it (``observe_backlog``);
``should_start`` only compares the last figure. A range forgets it (``begin``), so a finished
range never restarts on a stale figure: the next one needs a fresh measurement.

Failure policy: exit 75 or a killed job is rerun (``retries`` times, ``retry-delay`` apart) on
the same staged range; exit 1, or retries used up, stops the drainer with a ``CatchUpError``.
Either way the checkpoint stays at ``S``: the job writes the rows of the whole range in one
downstream transaction and is idempotent, so a rerun after a restart converges.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from services.drainer.catchup_job import JobRunner, JobSpec, retriable_exit, run_job
from services.drainer.errors import DrainerError
from tributary.change import Txn
from tributary.staging import RangeInfo
from tributary.telemetry.progress import LogOutput, duration
from tributary.telemetry.progress import Progress as Meter
from tributary.wire.ts import physical_ms

if TYPE_CHECKING:
    from tributary.staging.writer import StagingWriter

log = logging.getLogger(__name__)

PROGRESS_KEPT = 20  # job progress lines shown in /status
LOG_EVERY = 10.0  # seconds between logged progress lines of staging and of the job


class CatchUpError(DrainerError):
    """The catch-up job failed for good; the checkpoint is still the range start."""


class BacklogCounter(Protocol):
    async def __call__(self, after_ts: int) -> int | None:
        """Binlogs committed after ``after_ts`` that the pumps hold (summed over them); None
        when it cannot be told right now (a pump unreachable)."""
        ...


class Phase(enum.StrEnum):
    IDLE = "idle"
    DRAINING = "draining"  # waiting for the apply buffer to be applied
    STAGING = "staging"
    RUNNING = "running"  # the job runs
    FINISHING = "finishing"  # the checkpoint marker is being applied
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class CatchUpSettings:
    job: JobSpec
    lag_threshold: float = 300.0  # 0: only on request
    backlog_threshold: int = 0  # binlogs; 0: off
    backlog_interval: float = 30.0  # seconds between backlog measurements
    resume_lag: float = 10.0
    idle: float = 5.0
    max_range_rows: int = 1_000_000
    retries: int = 3
    retry_delay: float = 5.0


@dataclass
class Staged:
    """What ``stage`` consumed: the range (None if no rows), how many transactions went in,
    the last commit ts among them, and the transaction that ended the range (if one did)."""

    info: RangeInfo | None
    consumed: int
    last_ts: int
    held: Txn | None
    reason: str


class CatchUp:
    def __init__(
        self,
        settings: CatchUpSettings,
        *,
        runner: JobRunner = run_job,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._runner = runner
        self._wall = wall
        self._sleep = sleep
        self._clock = clock
        self._logged: float | None = None  # when the job's progress was last logged
        self._requested = False
        self.phase = Phase.IDLE
        self.start_ts = self.end_ts = 0
        self.rows = self.txns = self.attempts = 0
        self.pid: int | None = None
        self.reason = self.error = ""
        self.trigger = ""  # why the current (or last) catch-up started
        self.backlog: int | None = None  # binlogs behind, as last measured since the last range
        self.progress: deque[dict[str, Any]] = deque(maxlen=PROGRESS_KEPT)
        self.job: dict[str, Any] | None = None  # the job's last rows line (done, total, ETA)
        self.ranges = 0  # ranges caught up
        self.rows_total = 0  # row changes caught up
        self.failures = 0  # job runs that failed
        self.last_done: dict[str, Any] | None = None  # the status of the last range caught up
        self.schema_version = 0  # the newest schema version of the transactions seen

    @property
    def active(self) -> bool:
        return self.phase in (Phase.DRAINING, Phase.STAGING, Phase.RUNNING, Phase.FINISHING)

    @property
    def holds_stream(self) -> bool:
        """The stream after the range waits (unconverted) until the job has ended."""
        return self.phase in (Phase.DRAINING, Phase.STAGING, Phase.RUNNING)

    def request(self) -> bool:
        """An operator's trigger; False if one is under way already."""
        if self.active:
            return False
        self._requested = True
        return True

    def lag(self, txn: Txn) -> float:
        return self._wall() - physical_ms(txn.commit_ts) / 1000

    def should_start(self, txn: Txn) -> bool:
        """Whether a catch-up starts at ``txn``; records why in ``trigger``. Worked example
        (lag-threshold 300, backlog-threshold 100000): txn 20 s behind, backlog 250000 ->
        start ("backlog 250000 binlogs"); txn 400 s behind, backlog unknown -> start ("lag
        400 s"); txn 20 s behind, backlog 5000 -> stream it. Every converted transaction
        passes here: its schema version counts for the late ones of a range."""
        self.schema_version = max(self.schema_version, txn.schema_version)
        s = self.settings
        if self._requested:
            self.trigger = "requested"
        elif s.lag_threshold > 0 and (lag := self.lag(txn)) >= s.lag_threshold:
            self.trigger = f"lag {lag:.0f} s"
        elif s.backlog_threshold > 0 and (self.backlog or 0) >= s.backlog_threshold:
            self.trigger = f"backlog {self.backlog} binlogs"
        else:
            return False
        return True

    def observe_backlog(self, binlogs: int | None) -> None:
        """The latest measurement (None: unknown); ignored while a range is under way."""
        if not self.active:
            self.backlog = binlogs

    async def measure_backlog(self, count: BacklogCounter, position: Callable[[], int]) -> NoReturn:
        """Measure the backlog above ``position()`` (the applied checkpoint) forever, every
        ``backlog-interval`` seconds, between ranges. Needs ``backlog-threshold`` > 0."""
        while True:
            if not self.active:
                self.observe_backlog(await count(position()))
            await self._sleep(self.settings.backlog_interval)

    def begin(self) -> None:
        self._requested = False
        self.backlog = None
        self.phase = Phase.DRAINING
        self.rows = self.txns = self.attempts = 0
        self.pid = None
        self.reason = self.error = ""
        self.progress.clear()
        self.job = None
        self._logged = None

    def _ends_range(self, txn: Txn, writer: StagingWriter) -> str:
        if txn.ddl is not None:
            return "ddl"
        if any(not change.table.primary_key for change in txn.rows):
            return "table without primary key"
        if 0 < txn.schema_version < self.schema_version:
            return "late transaction"
        if not all(writer.fits(change.table) for change in txn.rows):
            return "table definition changed"
        if self.lag(txn) < self.settings.resume_lag:
            return "caught up"
        if writer.rows >= self.settings.max_range_rows:
            return "row cap"
        return ""

    async def stage(
        self, start_ts: int, first: Txn, next_txn: Callable[[float], Awaitable[Txn | None]]
    ) -> Staged:
        """Stage ``first`` and what ``next_txn(idle)`` gives (None: idle) until the range ends."""
        self.phase, self.start_ts, self.end_ts = Phase.STAGING, start_ts, start_ts
        directory = self.settings.job.staging
        from tributary.staging.writer import StagingWriter  # pyarrow: only when a range is staged

        writer = await asyncio.to_thread(StagingWriter, directory, start_ts)
        # no total: the range ends when the stream says so; the line shows rows and rate
        meter = Meter("catch-up staging", LogOutput(log), every=LOG_EVERY, clock=self._clock)
        consumed, reason = 0, ""
        txn: Txn | None = first
        while True:
            if txn is None:
                reason = "idle"
                break
            reason = self._ends_range(txn, writer)
            self.schema_version = max(self.schema_version, txn.schema_version)
            if reason:
                break
            writer.add(txn)
            consumed += 1
            meter.add(writer.rows - self.rows)
            self.rows, self.txns, self.end_ts = writer.rows, writer.txns, writer.last_ts
            if writer.full:
                await asyncio.to_thread(writer.flush)
            txn = await next_txn(self.settings.idle)
        self.reason = reason
        info = await asyncio.to_thread(writer.close) if writer.txns else None
        log.info(
            "catch-up range (%d, %d] ended (%s): %d row changes of %d transactions in %.1f s",
            start_ts,
            writer.last_ts,
            reason,
            writer.rows,
            writer.txns,
            meter.elapsed(),
        )
        return Staged(info, consumed, writer.last_ts, txn, reason)

    async def execute(self, info: RangeInfo) -> None:
        """Run the job on the closed range until it succeeds; ``CatchUpError`` if it cannot."""
        self.phase = Phase.RUNNING
        spec = self.settings.job
        while True:
            self.attempts += 1
            self.pid = None
            code = await self._runner(spec, self._started, self._line)
            self.pid = None
            if code == 0:
                return
            self.failures += 1
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            if not retriable_exit(code) or self.attempts > self.settings.retries:
                self.failed(
                    f"catch-up job on ({info.start_ts}, {info.end_ts}] failed ({how}, attempt "
                    f"{self.attempts}); the checkpoint stays at {info.start_ts}; see "
                    f"{spec.log_path}"
                )
                raise CatchUpError(self.error)
            log.warning(
                "catch-up job failed (%s); rerun %d of %d in %.0f s",
                how,
                self.attempts,
                self.settings.retries,
                self.settings.retry_delay,
            )
            await self._sleep(self.settings.retry_delay)

    def _started(self, pid: int) -> None:
        self.pid = pid

    def _line(self, line: dict[str, Any]) -> None:
        """A line of the job's stdout: kept for ``/status``; a rows line is also the job's
        progress (``job``), logged every ``LOG_EVERY`` seconds and when it reaches the total."""
        self.progress.append(line)
        if line.get("phase") != "rows" or not isinstance(line.get("rows_done"), int):
            return
        done, total = line["rows_done"], line.get("rows_total")
        self.job = {
            "rows_done": done,
            "rows_total": total,
            "percent": round(100 * done / total, 1) if total else None,
            "rate": line.get("rate"),
            "eta_s": line.get("eta_s"),
        }
        now = self._clock()
        if self._logged is None or done == total or now - self._logged >= LOG_EVERY:
            self._logged = now
            log.info("catch-up job on (%d, %d]: %s", self.start_ts, self.end_ts, job_line(self.job))

    def finishing(self) -> None:
        self.phase = Phase.FINISHING

    def done(self, rows: int) -> None:
        self.phase = Phase.DONE
        self.ranges += 1
        self.rows_total += rows
        self.last_done = self._current()

    def skipped(self) -> None:
        """The range ended before any row was staged: nothing for a job to do."""
        self.phase = Phase.IDLE

    def failed(self, error: str) -> None:
        self.phase, self.error = Phase.FAILED, error

    def status(self) -> dict[str, Any]:
        return {
            **self._current(),
            "ranges_done": self.ranges,
            "rows_caught_up": self.rows_total,
            "failures": self.failures,
            "last_done": self.last_done,
            "backlog": self.backlog,
        }

    def _current(self) -> dict[str, Any]:
        return {
            "state": self.phase.value,
            "start_ts": self.start_ts,
            "end_ts": self.end_ts,
            "rows": self.rows,
            "txns": self.txns,
            "attempts": self.attempts,
            "pid": self.pid,
            "trigger": self.trigger,
            "reason": self.reason,
            "error": self.error,
            "progress": list(self.progress),
            "job": self.job,
        }


def job_line(job: dict[str, Any]) -> str:
    """``rows 300/1,000 (30%), 120 rows/s, ETA 6s`` (``done`` when the total is reached)."""
    done, total = job["rows_done"], job["rows_total"]
    parts = [f"rows {done:,}/{total:,}" if total is not None else f"rows {done:,}"]
    if job.get("percent") is not None:
        parts[0] += f" ({job['percent']:.0f}%)"
    if job.get("rate") is not None:
        parts.append(f"{job['rate']:,.0f} rows/s")
    if total is not None and done >= total:
        parts.append("done")
    elif job.get("eta_s") is not None:
        parts.append(f"ETA {duration(job['eta_s'])}")
    return ", ".join(parts)
