"""The progress reporter with a fake clock and fake streams: terminal redraws, log lines."""

from __future__ import annotations

import io
import logging

import pytest

from tributary.telemetry.progress import NoOutput, Progress, duration, open_progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_line_has_count_rate_percent_and_eta() -> None:
    clock = Clock()
    p = open_progress("load", mode="off", total=12_000, clock=clock)
    clock.now += 10
    p.add(3_000)
    assert p.line() == "load: rows 3,000/12,000, 300 rows/s, 25%, ETA 30s"
    assert (p.rate(), p.eta()) == (300.0, 30.0)


def test_no_eta_before_anything_is_done() -> None:
    p = open_progress("load", mode="off", total=10, clock=Clock())
    assert p.eta() is None
    assert open_progress("load", mode="off", clock=Clock()).eta() is None  # no total


def test_side_counts_and_an_estimate_without_total() -> None:
    clock = Clock()
    p = open_progress("check", mode="off", clock=clock)
    p.count("tables", total=4)
    p.count("chunks", 3)
    clock.now += 60
    p.add(600)
    p.estimate(0.5)
    assert p.line() == "check: rows 600, tables 1/4, chunks 3, 10 rows/s, 50%, ETA 1m00s"


def test_tty_redraws_in_place_at_most_every_redraw_period() -> None:
    clock, stream = Clock(), Tty()
    p = open_progress("job", stream=stream, redraw=0.25, clock=clock)
    p.add(1)  # not due yet
    assert stream.getvalue() == ""
    clock.now += 0.3
    p.add(1)
    p.add(1)  # same instant: no second redraw
    clock.now += 0.3
    p.add(1)
    p.finish()
    p.finish()
    out = stream.getvalue()
    assert "\n" not in out.rstrip("\n") and out.endswith("\n")
    draws = out.split("\r")[1:]
    assert len(draws) == 3
    assert draws[0].startswith("job: rows 2,")
    assert draws[1].startswith("job: rows 4,")
    assert draws[2].startswith("job: rows 4, ") and "done in 1s" in draws[2]


def test_non_tty_logs_every_interval_and_the_final_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, stream = Clock(), io.StringIO()
    caplog.set_level(logging.INFO, logger="tributary.telemetry.progress")
    p = open_progress("job", stream=stream, interval=10, clock=clock, total=10)
    for _ in range(10):
        clock.now += 3
        p.add(1)
    p.finish()
    assert stream.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3  # at 12 s and 24 s, then the final line
    assert lines[0] == "job: rows 4/10, 0.3 rows/s, 40%, ETA 18s"
    assert lines[-1] == "job: rows 10/10, 0.3 rows/s, done in 30s"


def test_a_failed_job_shows_no_done_line() -> None:
    stream = Tty()
    with pytest.raises(RuntimeError), open_progress("job", stream=stream) as p:
        p.add(1)
        raise RuntimeError("boom")
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59.4, "59s"), (185, "3m05s"), (7620, "2h07m")]
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_progress_of_nothing_is_complete() -> None:
    p = Progress("x", NoOutput(), total=0)
    assert p.fraction() == 1.0
