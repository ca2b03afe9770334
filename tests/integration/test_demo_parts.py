"""The demo's parts, each on its own: progress numbers, the endpoints from the environment,
the verdict, the drainer watch (against a real HTTP server standing in for the drainer's API)
and the load (both workloads on a real SQLite upstream, with in-memory TSO, binlog writer and
etcd).

(Kept beside test_demo.py because these files belong to the demo.)
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from services.demo import ctl
from services.demo.cli import parse
from services.demo.drainer_watch import DrainerWatch
from services.demo.endpoints import UsageError, endpoints_from
from services.demo.errors import DemoError
from services.demo.load import DemoLoad, split
from services.demo.progress import HEADER, Counts, lag_seconds, parse_applied, progress_line
from services.demo.verdict import Verdict
from tributary.checker import Report, TableReport
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import KvDdlHistory
from tributary.pumpclient import PumpClientError
from tributary.wire.ts import compose
from tributary.workload import open_upstream, total_balance

# -- progress numbers ------------------------------------------------------------------------

T0 = 1_700_000_000_000  # ms since the epoch
STARTED_AFTER = compose(T0, 0)


def test_lag_is_now_minus_the_checkpoints_physical_time() -> None:
    checkpoint = compose(T0 + 11_750, 3)
    assert lag_seconds(checkpoint, T0 / 1000 + 12.5, STARTED_AFTER) == pytest.approx(0.75)


def test_lag_is_unknown_before_the_first_checkpoint_past_the_start() -> None:
    now = T0 / 1000 + 30
    assert lag_seconds(None, now, STARTED_AFTER) is None  # the drainer did not answer
    assert lag_seconds(STARTED_AFTER, now, STARTED_AFTER) is None  # nothing replicated yet
    assert lag_seconds(STARTED_AFTER + 1, now, STARTED_AFTER) == pytest.approx(30)


def test_lag_is_never_negative_when_the_tso_runs_ahead() -> None:
    assert lag_seconds(compose(T0 + 500, 0), T0 / 1000, STARTED_AFTER) == 0.0


METRICS_PAGE = """\
# HELP binlog_drainer_applied_binlog_count binlogs the sink accepted
# TYPE binlog_drainer_applied_binlog_count gauge
binlog_drainer_applied_binlog_count 1234.0
binlog_drainer_applied_binlog_countx 5.0
binlog_drainer_merged_binlog_count 1300.0
"""


def test_applied_count_is_read_from_the_metrics_page() -> None:
    assert parse_applied(METRICS_PAGE) == 1234
    assert parse_applied("binlog_drainer_merged_binlog_count 3.0\n") is None
    assert parse_applied("binlog_drainer_applied_binlog_count NaNx\n") is None


def test_progress_lines_line_up_under_the_header() -> None:
    line = progress_line(3, 412.4, Counts(1236, 4, 9000), 1190, 0.62)
    assert line.split() == ["3s", "412", "1236", "4", "1190", "0.6", "s"]
    columns = {"load": "3s", "txn/s": "412", "commits": "1236", "DDLs": "4", "applied": "1190"}
    for title, value in {**columns, "lag": "0.6 s"}.items():
        end = HEADER.index(title) + len(title)  # right-aligned: values end where titles end
        assert line[:end].endswith(value), (title, HEADER, line)
    unknown = progress_line(12, 0.0, Counts(5, 0, 0), None, None)
    assert unknown.split() == ["12s", "0", "5", "0", "-", "-"]
    assert len(unknown) == len(line) == len(HEADER)


def test_counts_subtract_and_writers_split() -> None:
    assert Counts(10, 3, 100) - Counts(4, 1, 40) == Counts(6, 2, 60)
    assert split(8) == (4, 4)
    assert split(5) == (3, 2)
    assert split(2) == (1, 1)


# -- endpoints ---------------------------------------------------------------------------------

DATA = Path("/data/demo")


def test_both_sides_default_to_sqlite_files_in_the_data_dir() -> None:
    ends = endpoints_from({}, DATA)
    assert ends.upstream == "sqlite:///data/demo/upstream.db"
    assert ends.downstream == ends.sink_url == "sqlite:///data/demo/downstream.db"
    assert ends.sqlite_path("downstream") == DATA / "downstream.db"


def test_a_mysql_downstream_gets_consistent_mode_and_the_checker_the_plain_url() -> None:
    env = {"TRIBUTARY_DEMO_DOWNSTREAM": "mysql://root:s3cret@127.0.0.1:3307/"}
    ends = endpoints_from(env, DATA)
    assert ends.upstream == "sqlite:///data/demo/upstream.db"  # the other side keeps its default
    assert ends.downstream == "mysql://root:s3cret@127.0.0.1:3307"
    assert ends.sink_url == "mysql://root:s3cret@127.0.0.1:3307/?consistent=true"
    assert ends.sqlite_path("downstream") is None
    assert "s3cret" not in ends.shown("downstream")
    up = endpoints_from({"TRIBUTARY_DEMO_UPSTREAM": "mysql://u:p@db.example:3306"}, DATA)
    assert up.upstream == "mysql://u:p@db.example:3306"
    assert endpoints_from({"TRIBUTARY_DEMO_UPSTREAM": "mysql://u@h"}, DATA).upstream == (
        "mysql://u@h:3306"
    )


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"TRIBUTARY_DEMO_UPSTREAM": "postgres://u:pw@h:5432"}, "must look like mysql://"),
        ({"TRIBUTARY_DEMO_DOWNSTREAM": "mysql://u:pw@h:3306/shop"}, "names a server only"),
        ({"TRIBUTARY_DEMO_DOWNSTREAM": "mysql://u:pw@h:3306/?consistent=false"}, "server only"),
        ({"TRIBUTARY_DEMO_UPSTREAM": "mysql://u:pw@h:port"}, "bad port"),
        (
            {
                "TRIBUTARY_DEMO_UPSTREAM": "mysql://u:pw@127.0.0.1:3306",
                "TRIBUTARY_DEMO_DOWNSTREAM": "mysql://v:pw@127.0.0.1:3306/",
            },
            "the same server",
        ),
    ],
)
def test_unusable_settings_are_refused_without_showing_the_password(
    env: dict[str, str], says: str
) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        endpoints_from(env, DATA)
    assert "pw@" not in str(caught.value)


def test_the_cli_exits_with_code_2_on_a_bad_environment(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parse([], {"TRIBUTARY_DEMO_UPSTREAM": "sqlite:///x.db"})
    assert caught.value.code == 2
    assert "TRIBUTARY_DEMO_UPSTREAM must look like mysql://" in capsys.readouterr().err
    opts, level = parse(["--duration", "4", "--writers", "6", "-L", "info"], {})
    assert (opts.duration, opts.writers, level) == (4.0, 6, "info")
    assert opts.endpoints.upstream.startswith("sqlite:///")


# -- verdict -----------------------------------------------------------------------------------


def report(*tables: TableReport) -> Report:
    return Report("up", "down", list(tables))


EQUAL = report(TableReport("demo_bank.accounts", "demo_bank.accounts"))


def verdict(**changes: object) -> Verdict:
    base: dict[str, object] = {
        "load_error": "",
        "caught_up": True,
        "report": EQUAL,
        "check_error": "",
        "expected_total": 1000,
        "upstream_total": 1000,
        "downstream_total": 1000,
    }
    return Verdict(**{**base, **changes})  # type: ignore[arg-type]


def test_the_verdict_passes_only_when_every_check_does() -> None:
    assert verdict().ok and verdict().reasons() == []
    differing = TableReport("demo_mixed.sbtest", "demo_mixed.sbtest", missing=2)
    cases = {
        "the workload failed": verdict(load_error="bank: boom"),
        "did not catch up": verdict(caught_up=False, report=None, downstream_total=None),
        "1 of 2 tables differ": verdict(report=report(EQUAL.tables[0], differing)),
        "bank total 1000 upstream, 990 downstream": verdict(downstream_total=990),
        "the check could not run": verdict(check_error="the check could not run: gone"),
        "the comparison did not run": verdict(report=None),
    }
    for reason, v in cases.items():
        assert not v.ok, reason
        assert any(reason in r for r in v.reasons()), (reason, v.reasons())


def test_a_total_equal_on_both_sides_but_not_the_opening_one_fails() -> None:
    v = verdict(upstream_total=990, downstream_total=990)
    assert not v.totals_ok and not v.ok


# -- drainer watch -----------------------------------------------------------------------------


class FakeDrainerApi:
    """The two routes of the drainer's HTTP API the demo reads, served for real on loopback."""

    def __init__(self) -> None:
        self.ts = 0
        self.applied = 0
        self.broken = False

    def app(self) -> web.Application:
        app = web.Application()

        async def commit_ts(_: web.Request) -> web.Response:
            if self.broken:
                return web.Response(status=500)
            return web.json_response({"message": "ok", "code": 200, "data": {"ts": self.ts}})

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text=f"binlog_drainer_applied_binlog_count {self.applied}.0\n")

        app.router.add_get("/commit_ts", commit_ts)
        app.router.add_get("/metrics", metrics)
        return app


@pytest.fixture
async def drainer_api() -> AsyncIterator[tuple[FakeDrainerApi, DrainerWatch]]:
    api = FakeDrainerApi()
    runner = web.AppRunner(api.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    ticks = itertools.count()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            # each look at the clock is one more second: the timeout counts polls, not time
            yield api, DrainerWatch(http, f"http://127.0.0.1:{port}", clock=lambda: next(ticks))
    finally:
        await runner.cleanup()


async def test_the_watch_reads_checkpoint_and_applied_count(
    drainer_api: tuple[FakeDrainerApi, DrainerWatch],
) -> None:
    api, watch = drainer_api
    api.ts, api.applied = 4242, 17
    sample = await watch.sample()
    assert (sample.checkpoint_ts, sample.applied) == (4242, 17)
    api.broken = True
    assert (await watch.sample()).checkpoint_ts is None  # unknown, not an error


async def test_wait_past_returns_once_the_checkpoint_reaches_the_target(
    drainer_api: tuple[FakeDrainerApi, DrainerWatch],
) -> None:
    api, watch = drainer_api
    api.ts = 100

    async def advance() -> None:
        for ts in (150, 199, 200):
            await asyncio.sleep(0.05)
            api.ts = ts

    mover = asyncio.create_task(advance(), name="test-advance")
    caught = await watch.wait_past(200, 1000, alive=lambda: None)
    await mover
    assert caught.reached and caught.checkpoint_ts == 200


async def test_wait_past_gives_up_after_its_bound_and_says_where_it_stayed(
    drainer_api: tuple[FakeDrainerApi, DrainerWatch],
) -> None:
    api, watch = drainer_api
    api.ts = 150
    caught = await watch.wait_past(200, 5, alive=lambda: None)
    assert not caught.reached
    assert caught.checkpoint_ts == 150 and caught.waited >= 5


async def test_wait_past_stops_at_once_when_the_drainer_process_is_gone(
    drainer_api: tuple[FakeDrainerApi, DrainerWatch],
) -> None:
    _, watch = drainer_api

    def gone() -> None:
        raise DemoError("drainer exited with code 1")

    with pytest.raises(DemoError, match="exited"):
        await watch.wait_past(200, 1000, alive=gone)


# -- the load ----------------------------------------------------------------------------------


class CountingTso:
    def __init__(self) -> None:
        self.ts = 1000

    async def get_ts(self) -> int:
        self.ts += 1
        return self.ts


class RecordingBinlogs:
    """Every prewrite and how it ended; prewrites beyond ``fail_after`` are refused for good."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.prewrites: list[int] = []
        self.ends: dict[int, str] = {}
        self.fail_after = fail_after

    async def prewrite(
        self,
        start_ts: int,
        prewrite_value: bytes,
        prewrite_key: bytes = b"",
        ddl_query: bytes = b"",
        ddl_job_id: int = 0,
    ) -> None:
        await asyncio.sleep(0)
        if self.fail_after is not None and len(self.prewrites) >= self.fail_after:
            raise PumpClientError("every pump is gone", retriable=False)
        self.prewrites.append(start_ts)

    async def commit(self, start_ts: int, commit_ts: int) -> None:
        self.ends[start_ts] = "commit"

    async def rollback(self, start_ts: int) -> None:
        self.ends[start_ts] = "rollback"


async def test_bank_and_mixed_run_together_and_keep_the_bank_total(tmp_path: Path) -> None:
    binlogs = RecordingBinlogs()
    async with open_upstream(f"sqlite://{tmp_path / 'up.db'}") as up:
        load = DemoLoad(up, binlogs, CountingTso(), KvDdlHistory(MemoryKv()), accounts=40, seed=7)
        setup = await load.setup()
        assert setup.ddls >= 6 and load.tables >= 5  # two databases, bank's and mixed's tables
        result = await load.run(4, 0.5, asyncio.Event())
        written = load.counts() - setup
        assert result.error == ""
        assert result.bank.commits > setup.commits and result.mixed.commits > 0
        assert written.commits > 0
        assert result.max_commit_ts == max(result.bank.max_commit_ts, result.mixed.max_commit_ts)
        assert await total_balance(up, "demo_bank") == result.expected_total == 40 * 1000
    assert set(binlogs.prewrites) == set(binlogs.ends)  # no prewrite left without its end


async def test_stop_ends_both_workloads_between_transactions(tmp_path: Path) -> None:
    binlogs = RecordingBinlogs()
    stop = asyncio.Event()
    async with open_upstream(f"sqlite://{tmp_path / 'up.db'}") as up:
        load = DemoLoad(up, binlogs, CountingTso(), KvDdlHistory(MemoryKv()), accounts=20)
        await load.setup()

        async def press_ctrl_c() -> None:
            await asyncio.sleep(0.3)
            stop.set()

        async with asyncio.timeout(60), asyncio.TaskGroup() as tg:  # duration: 10 minutes
            tg.create_task(press_ctrl_c(), name="test-ctrl-c")
            result = await load.run(4, 600, stop)
    assert result.error == ""
    assert set(binlogs.prewrites) == set(binlogs.ends)


async def test_a_failing_writer_stops_the_other_workload_too(tmp_path: Path) -> None:
    binlogs = RecordingBinlogs()
    async with open_upstream(f"sqlite://{tmp_path / 'up.db'}") as up:
        load = DemoLoad(up, binlogs, CountingTso(), KvDdlHistory(MemoryKv()), accounts=20)
        await load.setup()
        binlogs.fail_after = len(binlogs.prewrites) + 30
        async with asyncio.timeout(60):  # duration: 10 minutes
            result = await load.run(4, 600, asyncio.Event())
    assert "every pump is gone" in result.error
    assert set(binlogs.prewrites) == set(binlogs.ends)  # the other writers ended cleanly


# -- binlogctl as a child process ------------------------------------------------------------


async def test_binlogctl_runs_as_a_child_with_its_output_and_exit_code() -> None:
    argv, code, out = await ctl.run_binlogctl("--cmd", "pumps", "--pd-urls", "http://127.0.0.1:1")
    assert argv[-4:] == ["--cmd", "pumps", "--pd-urls", "http://127.0.0.1:1"]
    assert code == 1 and "cannot reach etcd" in out  # stderr is in the output


async def test_binlogctl_past_its_time_is_killed_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctl, "CTL_TIMEOUT", 0.001)
    with pytest.raises(DemoError, match="did not finish"):
        await ctl.run_binlogctl("--help")
