"""Progress of long work (reparo, the checker, Spark jobs): count done, rate and ETA.

One ``Progress`` per job. The work calls ``add(n)`` for its main count (rows, binlogs) and
``count(name, n, total=...)`` for side counts (tables, chunks); when the total of the main
count is unknown it may give ``estimate(fraction)`` (reparo: bytes read of the files' size).
What is shown goes to one ``Output``:

- on a terminal (``TtyOutput``) one line redrawn in place with ``\\r`` at most every
  ``redraw`` seconds, and the final line ended by a newline;
- otherwise (``LogOutput``) a line through ``logging`` at INFO every ``interval`` seconds and
  the final one, so ``kubectl logs`` shows the job moving.

``open_progress`` picks the output: a terminal when the stream is a tty, else the log.

Invariant: ``finish`` shows the final line exactly once, however often it is called; nothing is
shown after it. Time comes from an injectable clock, so tests run without sleeping. The rate
is the average since the start (steady, and what an operator compares between runs); the ETA
is the remaining fraction at that rate. Worked example: 3,000 of 12,000 rows after 10 s is
300 rows/s, 25 %, and 9,000 rows left at 300 rows/s is an ETA of 30 s.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TextIO

log = logging.getLogger(__name__)

Clock = Callable[[], float]
MODES = ("auto", "tty", "log", "off")


class Output(Protocol):
    def show(self, line: str) -> None: ...
    def final(self, line: str) -> None: ...


class TtyOutput:
    """One line on a terminal, overwritten in place; the final line stays."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def show(self, line: str) -> None:
        self._stream.write(f"\r{line}\x1b[K")
        self._stream.flush()

    def final(self, line: str) -> None:
        self._stream.write(f"\r{line}\x1b[K\n")
        self._stream.flush()


class LogOutput:
    """A log line per report (``kubectl logs``, a log file)."""

    def __init__(self, logger: logging.Logger | logging.LoggerAdapter[logging.Logger]) -> None:
        self._log = logger

    def show(self, line: str) -> None:
        self._log.info("%s", line)

    def final(self, line: str) -> None:
        self._log.info("%s", line)


class NoOutput:
    def show(self, line: str) -> None:
        pass

    def final(self, line: str) -> None:
        pass


@dataclass
class Count:
    done: int = 0
    total: int | None = None

    def render(self, name: str) -> str:
        of = f"/{self.total:,}" if self.total is not None else ""
        return f"{name} {self.done:,}{of}"


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Counts of one job and when to show them; ``line()`` renders them."""

    def __init__(
        self,
        label: str,
        output: Output,
        *,
        unit: str = "rows",
        total: int | None = None,
        every: float = 10.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.label, self.unit, self.every = label, unit, every
        self.main = Count(total=total)
        self.side: dict[str, Count] = {}
        self._output, self._clock = output, clock
        self._start = clock()
        self._last_shown = self._start
        self._fraction: float | None = None
        self._finished = False

    def set_total(self, total: int | None) -> None:
        self.main.total = total

    def add(self, n: int = 1) -> None:
        """``n`` more of the main count done."""
        self.main.done += n
        self._maybe_show()

    def count(self, name: str, n: int = 1, *, total: int | None = None) -> None:
        """``n`` more of a side count (shown after the main one, in first-use order)."""
        c = self.side.setdefault(name, Count())
        c.done += n
        if total is not None:
            c.total = total
        self._maybe_show()

    def estimate(self, fraction: float) -> None:
        """How much of the whole is done (0..1) when the main count has no total."""
        self._fraction = min(1.0, max(0.0, fraction))

    def fraction(self) -> float | None:
        if self.main.total:
            return min(1.0, self.main.done / self.main.total)
        if self.main.total == 0:
            return 1.0
        return self._fraction

    def elapsed(self) -> float:
        return self._clock() - self._start

    def rate(self) -> float:
        """The main count per second since the start."""
        elapsed = self.elapsed()
        return self.main.done / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float | None:
        """Seconds left at the average rate; None while the fraction is unknown or 0."""
        f = self.fraction()
        if f is None or f <= 0:
            return None
        return self.elapsed() * (1 - f) / f

    def line(self, *, done: bool = False) -> str:
        elapsed = self.elapsed()
        parts = [self.main.render(self.unit)]
        parts += [c.render(name) for name, c in self.side.items()]
        rate = self.rate()
        parts.append(f"{rate:,.{1 if rate < 10 else 0}f} {self.unit}/s")
        f = self.fraction()
        if done:
            parts.append(f"done in {duration(elapsed)}")
        elif f is not None:
            parts.append(f"{f:.0%}")
            if 0 < f < 1:
                parts.append(f"ETA {duration(elapsed * (1 - f) / f)}")
        return f"{self.label}: " + ", ".join(parts)

    def _maybe_show(self) -> None:
        if self._finished:
            return
        now = self._clock()
        if now - self._last_shown >= self.every:
            self._last_shown = now
            self._output.show(self.line())

    def tick(self) -> None:
        """Show the line if it is due (for work that moves without counting)."""
        self._maybe_show()

    def finish(self) -> None:
        """Show the final line (once)."""
        if not self._finished:
            self._finished = True
            self._output.final(self.line(done=True))

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.finish()
        else:
            self._finished = True  # a failed job reports its error, not a "done" line


def open_progress(
    label: str,
    *,
    mode: str = "auto",
    unit: str = "rows",
    total: int | None = None,
    stream: TextIO | None = None,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
    redraw: float = 0.25,
    interval: float = 10.0,
    clock: Clock = time.monotonic,
) -> Progress:
    """A ``Progress`` showing on ``stream`` (default stderr) when it is a terminal, else logged.

    ``mode``: ``auto`` (that choice), ``tty``, ``log`` or ``off``. ``redraw``: seconds between
    terminal redraws; ``interval``: seconds between log lines. With ``log`` asked for by name
    the lines show even when the log level is above info (a command whose default is warn).
    """
    if mode not in MODES:
        raise ValueError(f"progress mode must be one of {', '.join(MODES)}, not {mode!r}")
    out = sys.stderr if stream is None else stream
    if mode == "log" and logger is None and log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)
    if mode == "auto":
        mode = "tty" if out.isatty() else "log"
    output: Output
    if mode == "tty":
        output, every = TtyOutput(out), redraw
    elif mode == "log":
        output, every = LogOutput(logger or log), interval
    else:
        output, every = NoOutput(), interval
    return Progress(label, output, unit=unit, total=total, every=every, clock=clock)
