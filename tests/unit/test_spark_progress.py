"""A Spark job's progress with a fake clock: rows per table, JSON lines, the human line."""

from __future__ import annotations

import io
import json
from typing import Any

from services.spark.progress import Progress
from tributary.staging.format import StagedTable
from tributary.telemetry.progress import open_progress


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def table(name: str, rows: int) -> StagedTable:
    return StagedTable("db", name, (), ("id",), name, rows)


def rows_lines(out: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    return [x for x in lines if x.get("phase") == "rows"]


def test_the_worked_example_reaches_the_total_and_never_goes_back() -> None:
    clock, out = Clock(), io.StringIO()
    p = Progress(out, clock=clock, interval=1000)
    a, b = table("a", 600), table("b", 400)
    p.plan([a, b])
    seen = []
    for t, f in ((a, 0.5), (b, 0.5), (a, 0.75), (a, 0.6), (a, 1.0), (b, 1.0)):
        clock.now += 1
        p.table(t, f)
        seen.append(p.done)
    assert seen == [300, 500, 650, 650, 800, 1000]
    p.finish()
    lines = rows_lines(out)
    # the plan, each completed table, the finish; nothing in between at this interval
    assert [x["rows_done"] for x in lines] == [0, 800, 1000, 1000]
    assert lines[-1] == {
        "event": "progress",
        "phase": "rows",
        "rows_done": 1000,
        "rows_total": 1000,
        "rate": 166.7,
        "eta_s": 0.0,
    }


def test_rows_lines_at_most_every_interval_with_rate_and_eta() -> None:
    clock, out = Clock(), io.StringIO()
    p = Progress(out, clock=clock, interval=2)
    t = table("t", 1000)
    p.plan([t])
    for i in range(1, 10):
        clock.now += 1
        p.table(t, i / 10)
    lines = rows_lines(out)
    assert [x["rows_done"] for x in lines] == [0, 200, 400, 600, 800]
    assert lines[2]["rate"] == 100.0 and lines[2]["eta_s"] == 6.0


def test_finish_completes_what_the_target_did_not_report_and_shows_the_final_line() -> None:
    clock, out, human = Clock(), io.StringIO(), io.StringIO()
    meter = open_progress("catch-up", mode="tty", stream=human, clock=clock)
    p = Progress(out, meter=meter, clock=clock)
    p.plan([table("a", 10), table("b", 0)])
    clock.now += 5
    p.finish()
    p.finish()
    assert rows_lines(out)[-1]["rows_done"] == 10
    assert human.getvalue().count("catch-up: rows 10/10, 2.0 rows/s, done in 5s\x1b[K\n") == 1


def test_an_unplanned_table_or_a_finished_job_counts_nothing() -> None:
    p = Progress(io.StringIO(), clock=Clock())
    p.plan([table("a", 10)])
    p.table(table("other", 5), 1.0)
    assert p.done == 0
    p.finish()
    p.table(table("a", 10), 1.0)
    assert p.done == 10
