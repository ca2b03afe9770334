"""Progress of a Spark job: JSON lines for whoever runs it, a human line for whoever watches.

A job reports two things through one ``Progress``:

* phases (``progress("staged", table=...)``): one JSON line each on stdout, as before;
* rows: ``plan(tables)`` fixes the total (the sum of the tables' ``rows``: a catch-up's staged
  rows, where an update that changes the key stages two, a bulk load's snapshot rows), and the
  target says how far each table has got with ``table(t, fraction)``. The rows done are the
  sum of each table's rows times its fraction, exactly its rows once it is complete, so the
  count reaches the total when every table is done and never goes back. They go to a
  ``tributary.telemetry`` meter (a line redrawn on a terminal, or logged every
  ``progress-interval`` seconds) and, at most every ``interval`` seconds, when a table
  completes and at ``finish``, as a JSON line ``{"event": "progress", "phase": "rows",
  "rows_done", "rows_total", "rate", "eta_s"}`` that the drainer shows in ``/status``.

How a target measures a table's fraction is its own business (``mysql_target``: half when its
CSV files are written, the rest by the bytes of the files loaded; ``sqlite_target``: rows
written; the lake: whole tables). Worked example: tables a (600 rows) and b (400 rows); a's
CSV files written (a at 0.5: 300 done), then b's (b at 0.5: 500 done), then a's two equal
files loaded (a at 0.75, then 1.0: 650, 800), then b's one file (1000 = the total).

This module does not import pyspark: unit tests use it without a JVM.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from typing import TextIO

from tributary.staging.format import StagedTable
from tributary.telemetry.progress import MODES, Clock, NoOutput, open_progress
from tributary.telemetry.progress import Progress as Meter

ROWS = "rows"  # the phase of the rows lines
INTERVAL = 2.0  # seconds between rows lines on stdout


class Progress:
    """``out``: the JSON lines' stream (default stdout); ``meter``: the human line (default
    none shown)."""

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        meter: Meter | None = None,
        interval: float = INTERVAL,
        clock: Clock = time.monotonic,
    ) -> None:
        self._out = out
        self.meter = meter or Meter("job", NoOutput(), clock=clock)
        self._interval, self._clock = interval, clock
        self._weights: dict[str, int] = {}
        self._credited: dict[str, int] = {}
        self._last_line: float | None = None
        self._finished = False

    def __call__(self, phase: str, **fields: object) -> None:
        out = self._out or sys.stdout
        out.write(json.dumps({"event": "progress", "phase": phase, **fields}) + "\n")
        out.flush()

    def plan(self, tables: Iterable[StagedTable]) -> None:
        """The tables the job writes, each weighing its ``rows``; their sum is the total."""
        self._weights = {t.qualified: t.rows for t in tables}
        self._credited = dict.fromkeys(self._weights, 0)
        self.meter.set_total(sum(self._weights.values()))
        self._rows_line()

    def table(self, t: StagedTable, fraction: float) -> None:
        """``t`` is ``fraction`` (0..1) done; a smaller fraction than before changes nothing."""
        weight = self._weights.get(t.qualified)
        if weight is None or self._finished:
            return
        credit = weight if fraction >= 1 else int(weight * max(0.0, fraction))
        more = credit - self._credited[t.qualified]
        if more <= 0:
            return
        self._credited[t.qualified] = credit
        self.meter.add(more)
        now = self._clock()
        if credit == weight or self._last_line is None or now - self._last_line >= self._interval:
            self._rows_line()

    @property
    def done(self) -> int:
        return self.meter.main.done

    def finish(self) -> None:
        """The job has written everything: every table complete, the final lines shown."""
        if self._finished:
            return
        rest = sum(self._weights.values()) - self.done
        if rest > 0:
            self.meter.add(rest)
        self._credited = dict(self._weights)
        self._finished = True
        self._rows_line()
        self.meter.finish()

    def _rows_line(self) -> None:
        self._last_line = self._clock()
        eta = self.meter.eta()
        self(
            ROWS,
            rows_done=self.done,
            rows_total=self.meter.main.total,
            rate=round(self.meter.rate(), 1),
            eta_s=None if eta is None else round(eta, 1),
        )


def add_progress_arguments(ap: argparse.ArgumentParser) -> None:
    """``--progress`` and ``--progress-interval``, as reparo's and the checker's settings."""
    ap.add_argument(
        "--progress",
        choices=MODES,
        default="auto",
        help="rows, rate, ETA on stderr: auto = redrawn on a terminal, else logged; tty; log; off",
    )
    ap.add_argument(
        "--progress-interval", type=float, default=10.0, help="seconds between logged lines"
    )


def open_meter(label: str, args: argparse.Namespace) -> Meter:
    """The human line ``add_progress_arguments``' options ask for, on stderr."""
    if args.progress_interval <= 0:
        raise SystemExit("--progress-interval must be positive")
    return open_progress(label, mode=args.progress, interval=args.progress_interval)
