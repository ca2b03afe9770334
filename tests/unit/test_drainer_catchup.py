"""Catch-up in the drainer's syncer: when a range starts and ends, what is staged, that the
checkpoint moves to the range end only after the job succeeded (through the sink), reruns and
stopping on failure, the job subprocess, the HTTP trigger and the settings."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pyarrow.parquet as pq
import pytest

from services.binlogctl.actions import catchup_url
from services.binlogctl.cli import parse
from services.binlogctl.config import Command
from services.drainer.catchup import CatchUp, CatchUpError, CatchUpSettings, Phase
from services.drainer.catchup_job import JobRunner, JobSpec, run_job
from services.drainer.http import routes
from services.drainer.item import PulledBinlogItem
from services.drainer.progress import Checkpointer
from services.drainer.state import DrainerState
from services.drainer.syncer import Syncer
from tests.support.fakes import MemoryCheckpoint, RecordingSink
from tests.support.waits import eventually
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.config.drainer import DrainerConfig
from tributary.registry.status import NodeKind, NodeState
from tributary.settings import SettingsError, load
from tributary.staging import OP_DELETE, OP_UPSERT, RangeInfo, read_range
from tributary.telemetry.http import OpsServer
from tributary.wire.ts import compose

T = TableInfo.build("db", "t", [("id", "bigint"), ("v", "bigint")], ["id"])
NOKEY = TableInfo.build("db", "log", [("msg", "varchar(10)")], [])
NOW = 10_000.0  # the fake wall clock, seconds
CLOCK = [NOW]  # what the catch-ups' wall clock says; tests that move it put it back


@pytest.fixture(autouse=True)
def _clock() -> None:
    CLOCK[0] = NOW


def ts(seconds: float, logical: int = 0) -> int:
    return compose(int(seconds * 1000), logical)


class FakeJob:
    """A JobRunner: records the staged range and the sink checkpoint at each run, then exits
    with the next of ``codes``."""

    def __init__(self, sink: RecordingSink, codes: list[int]) -> None:
        self.sink = sink
        self.codes = codes
        self.ranges: list[tuple[int, int, int]] = []
        self.checkpoints: list[int | None] = []
        self.ops: list[list[tuple[str, int]]] = []

    async def __call__(
        self,
        spec: JobSpec,
        on_start: Callable[[int], None],
        on_line: Callable[[dict[str, Any]], None],
    ) -> int:
        info = read_range(spec.staging)
        self.ranges.append((info.start_ts, info.end_ts, info.rows))
        self.checkpoints.append(self.sink.ckpt)
        ops: list[tuple[str, int]] = []
        for t in info.tables:
            table = pq.read_table(spec.staging / t.directory).sort_by("_seq")
            ops += list(zip(table["_op"].to_pylist(), table["id"].to_pylist(), strict=True))
        self.ops.append(ops)
        on_start(4242)
        on_line({"event": "progress", "phase": "planned"})
        return self.codes.pop(0)


def rows(commit: int, *changes: RowChange) -> Txn:
    return Txn(commit, commit - 1, changes)


def setup(
    tmp_path: Path,
    sink: RecordingSink,
    codes: list[int],
    runner: JobRunner | None = None,
    **kw: Any,
) -> tuple[Syncer, asyncio.Queue[PulledBinlogItem], Checkpointer, CatchUp, FakeJob, dict[int, Txn]]:
    """A syncer whose ``convert`` looks the txn up by commit ts in the returned dict; its jobs
    run on ``runner`` if given, else on the returned FakeJob."""
    txns: dict[int, Txn] = {}

    async def convert(item: PulledBinlogItem) -> Txn:
        return txns[item.commit_ts]

    job = FakeJob(sink, codes)
    settings = CatchUpSettings(
        JobSpec(tmp_path / "staging", "sqlite:///nowhere"),
        **{"lag_threshold": 100.0, "resume_lag": 10.0, "idle": 0.2, "retry_delay": 0, **kw},
    )
    catchup = CatchUp(settings, runner=runner or job, wall=lambda: CLOCK[0])
    queue: asyncio.Queue[PulledBinlogItem] = asyncio.Queue(100)
    ckpt = Checkpointer(MemoryCheckpoint(), ts(1))
    syncer = Syncer(queue, sink, ckpt, convert, catchup=catchup)
    return syncer, queue, ckpt, catchup, job, txns


async def feed(queue: asyncio.Queue[PulledBinlogItem], txns: dict[int, Txn], *new: Txn) -> None:
    for t in new:
        txns[t.commit_ts] = t
        await queue.put(PulledBinlogItem(t.commit_ts, t.start_ts, b"", False))


async def run_until(syncer: Syncer, done: Callable[[], bool]) -> None:
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(syncer.run())
        try:
            await eventually(done)
        finally:
            task.cancel()


async def test_a_lagging_backlog_is_staged_run_then_streaming_resumes(tmp_path: Path) -> None:
    sink = RecordingSink()
    syncer, queue, ckpt, catchup, job, txns = setup(tmp_path, sink, [0])
    CLOCK[0] = 1005.0
    fresh = rows(ts(1000), RowChange.insert(T, {"id": 1, "v": 1}))  # lag 5 s: streamed
    await feed(queue, txns, fresh)
    await run_until(syncer, lambda: ckpt.applied_ts == fresh.commit_ts)
    assert job.ranges == []
    CLOCK[0] = NOW  # the upstream ran on while the drainer was away
    # a backlog 500 s behind: inserts, an update of an existing key, a key change, a delete
    b1 = rows(ts(1001), RowChange.insert(T, {"id": 2, "v": 2}))
    b2 = rows(ts(1002), RowChange.update(T, {"id": 1, "v": 1}, {"id": 1, "v": 10}))
    b3 = rows(
        ts(1003),
        RowChange.update(T, {"id": 2, "v": 2}, {"id": 3, "v": 2}),
        RowChange.delete(T, {"id": 1, "v": 10}),
    )
    marker = Txn(ts(1004))
    a = rows(ts(NOW - 5), RowChange.insert(T, {"id": 9, "v": 0}))  # caught up: ends the range
    await feed(queue, txns, b1, b2, b3, marker, a)
    await run_until(syncer, lambda: ckpt.applied_ts == a.commit_ts)

    start = fresh.commit_ts
    assert job.ranges == [(start, marker.commit_ts, 4)]
    assert job.checkpoints == [start]  # the job ran with the sink still at the range start
    assert job.ops == [
        [(OP_UPSERT, 2), (OP_UPSERT, 1), (OP_DELETE, 2), (OP_UPSERT, 3), (OP_DELETE, 1)]
    ]
    # the sink got: the fresh txn, then the range marker (alone or compacted into a's batch)
    applied = [ts for batch in sink.batches for ts in batch]
    assert applied[0] == fresh.commit_ts and applied[-1] == a.commit_ts
    assert not set(applied) & {b1.commit_ts, b2.commit_ts, b3.commit_ts}
    assert catchup.phase is Phase.DONE and catchup.ranges == 1 and catchup.rows_total == 4
    status = catchup.status()
    assert (status["start_ts"], status["end_ts"], status["reason"]) == (
        start,
        marker.commit_ts,
        "caught up",
    )
    assert status["progress"] == [{"event": "progress", "phase": "planned"}]
    assert await syncer.drain(1.0)  # every merged binlog was accounted for


async def test_a_ddl_or_a_keyless_table_ends_the_range_and_is_streamed_after(
    tmp_path: Path,
) -> None:
    sink = RecordingSink()
    syncer, queue, ckpt, catchup, job, txns = setup(tmp_path, sink, [0, 0])
    b1 = rows(ts(NOW - 500), RowChange.insert(T, {"id": 1, "v": 1}))
    ddl = Txn(ts(NOW - 499), ts(NOW - 499), ddl=Ddl("db", "alter table t add c int", "t"))
    b2 = rows(ts(NOW - 498), RowChange.insert(T, {"id": 2, "v": 2}))
    keyless = rows(ts(NOW - 497), RowChange.insert(NOKEY, {"msg": "x"}))
    await feed(queue, txns, b1, ddl, b2, keyless)
    await run_until(syncer, lambda: ckpt.applied_ts == keyless.commit_ts)
    assert job.ranges == [(ts(1), b1.commit_ts, 1), (ddl.commit_ts, b2.commit_ts, 1)]
    applied = [t for batch in sink.batches for t in batch]
    assert applied == [b1.commit_ts, ddl.commit_ts, b2.commit_ts, keyless.commit_ts]
    assert catchup.ranges == 2


async def test_a_late_transaction_or_another_definition_ends_the_range(tmp_path: Path) -> None:
    # TiDB's metadata lock: a transaction of schema version 4 commits after the ALTER of 5.
    t_c = TableInfo.build("db", "t", [("id", "bigint"), ("v", "bigint"), ("c", "int")], ["id"])
    sink = RecordingSink()
    syncer, queue, ckpt, catchup, job, txns = setup(tmp_path, sink, [0, 0])

    def txn(seconds: float, version: int, t: TableInfo, values: dict[str, int]) -> Txn:
        commit = ts(NOW - seconds)
        return Txn(commit, commit - 1, (RowChange.insert(t, values),), schema_version=version)

    b1 = txn(500, 5, t_c, {"id": 1, "v": 1, "c": 5})
    ddl = Txn(ts(NOW - 499), ddl=Ddl("db", "alter table t add d int", "t"), schema_version=6)
    late = txn(498, 5, t_c, {"id": 2, "v": 2, "c": 0})  # first after the DDL: streamed
    b2 = txn(497, 6, T, {"id": 3, "v": 3})  # T stands for the new definition here
    unversioned = txn(496, 0, t_c, {"id": 4, "v": 4, "c": 0})  # T staged: another definition
    await feed(queue, txns, b1, ddl, late, b2, unversioned)
    await run_until(syncer, lambda: ckpt.applied_ts == unversioned.commit_ts)
    assert job.ranges == [(ts(1), b1.commit_ts, 1), (late.commit_ts, b2.commit_ts, 1)]
    applied = [t for batch in sink.batches for t in batch]
    assert applied == [t.commit_ts for t in (b1, ddl, late, b2, unversioned)]
    assert catchup.reason == "table definition changed" and catchup.schema_version == 6


async def test_a_killed_job_is_rerun_with_the_checkpoint_unchanged(tmp_path: Path) -> None:
    sink = RecordingSink()
    syncer, queue, ckpt, catchup, job, txns = setup(tmp_path, sink, [-9, 75, 0])
    b1 = rows(ts(NOW - 500), RowChange.insert(T, {"id": 1, "v": 1}))
    await feed(queue, txns, b1)  # then idle: the range ends after 0.2 s
    await run_until(syncer, lambda: ckpt.applied_ts == b1.commit_ts)
    assert job.checkpoints == [None, None, None]  # nothing moved the sink while it failed
    assert len(job.ranges) == 3 and catchup.reason == "idle"
    assert (catchup.attempts, catchup.failures, catchup.phase) == (3, 2, Phase.DONE)
    assert sink.batches == [[b1.commit_ts]]  # only the marker: the rows went through the job


async def test_a_failed_job_stops_the_syncer_leaving_the_checkpoint(tmp_path: Path) -> None:
    sink = RecordingSink()
    syncer, queue, ckpt, catchup, job, txns = setup(tmp_path, sink, [-9, 1], retries=3)
    b1 = rows(ts(NOW - 500), RowChange.insert(T, {"id": 1, "v": 1}))
    b2 = rows(ts(NOW - 1), RowChange.insert(T, {"id": 2, "v": 1}))
    await feed(queue, txns, b1, b2)
    with pytest.raises(ExceptionGroup) as e:
        async with asyncio.timeout(10):
            await syncer.run()
    assert e.group_contains(CatchUpError)
    assert (ckpt.applied_ts, sink.ckpt, sink.batches) == (ts(1), None, [])
    assert catchup.phase is Phase.FAILED and "checkpoint stays at" in catchup.error
    assert len(job.ranges) == 2


async def test_request_starts_a_catch_up_without_lag(tmp_path: Path) -> None:
    sink = RecordingSink()
    syncer, queue, ckpt, catchup, job, txns = setup(tmp_path, sink, [0], lag_threshold=0)
    b1 = rows(ts(NOW - 50), RowChange.insert(T, {"id": 1, "v": 1}))
    b2 = rows(ts(NOW - 40), RowChange.insert(T, {"id": 2, "v": 1}))
    await feed(queue, txns, b1)
    await run_until(syncer, lambda: ckpt.applied_ts == b1.commit_ts)
    assert job.ranges == []  # no lag threshold: streamed
    assert catchup.request()
    await feed(queue, txns, b2)
    await run_until(syncer, lambda: catchup.phase is Phase.DONE)
    assert job.ranges == [(b1.commit_ts, b2.commit_ts, 1)]
    assert ckpt.applied_ts == b2.commit_ts


def test_backlog_threshold_needs_a_fresh_measurement_at_or_above_it(tmp_path: Path) -> None:
    catchup = CatchUp(
        CatchUpSettings(
            JobSpec(tmp_path, "sqlite:///x"), lag_threshold=300.0, backlog_threshold=100_000
        ),
        wall=lambda: CLOCK[0],
    )
    recent = rows(ts(NOW - 20), RowChange.insert(T, {"id": 1, "v": 1}))  # 20 s behind
    assert not catchup.should_start(recent)  # nothing measured yet
    catchup.observe_backlog(99_999)
    assert not catchup.should_start(recent)
    catchup.observe_backlog(250_000)
    assert catchup.should_start(recent) and catchup.trigger == "backlog 250000 binlogs"
    catchup.begin()  # the range forgets the figure: no restart on a stale measurement
    assert catchup.backlog is None and not catchup.should_start(recent)
    catchup.observe_backlog(900_000)  # measured while a range is under way: ignored
    assert catchup.backlog is None
    catchup.skipped()
    catchup.observe_backlog(None)  # a pump could not tell
    assert not catchup.should_start(recent)
    old = rows(ts(NOW - 400), RowChange.insert(T, {"id": 1, "v": 1}))
    assert catchup.should_start(old) and catchup.trigger == "lag 400 s"
    assert catchup.status()["trigger"] == "lag 400 s" and catchup.status()["backlog"] is None

    off = CatchUp(CatchUpSettings(JobSpec(tmp_path, "sqlite:///x"), lag_threshold=0))
    off.observe_backlog(10**9)
    assert not off.should_start(recent)  # backlog-threshold 0: off


async def test_measure_backlog_asks_above_the_checkpoint_between_ranges(tmp_path: Path) -> None:
    class Stop(Exception):
        pass

    asked: list[int] = []
    answers: list[int | None] = [7, 3, 12]
    position = [ts(1)]

    async def count(after_ts: int) -> int | None:
        asked.append(after_ts)
        return answers.pop(0)

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            assert catchup.backlog == 7
            catchup.begin()  # a range starts: no measurement until it ends
        elif len(slept) == 2:
            assert asked == [ts(1)]
            catchup.skipped()
            position[0] = ts(2)  # the checkpoint moved
        elif len(slept) == 3:
            raise Stop

    catchup = CatchUp(
        CatchUpSettings(
            JobSpec(tmp_path, "sqlite:///x"), backlog_threshold=5, backlog_interval=2.5
        ),
        sleep=sleep,
    )
    with pytest.raises(Stop):
        await catchup.measure_backlog(count, lambda: position[0])
    assert asked == [ts(1), ts(2)]
    assert catchup.backlog == 3
    assert slept == [2.5, 2.5, 2.5]


async def test_a_measured_backlog_starts_a_catch_up_in_the_syncer(tmp_path: Path) -> None:
    sink = RecordingSink()
    syncer, queue, ckpt, catchup, job, txns = setup(
        tmp_path, sink, [0], lag_threshold=0, backlog_threshold=2
    )
    b1 = rows(ts(NOW - 50), RowChange.insert(T, {"id": 1, "v": 1}))
    b2 = rows(ts(NOW - 40), RowChange.insert(T, {"id": 2, "v": 1}))
    b3 = rows(ts(NOW - 30), RowChange.insert(T, {"id": 3, "v": 1}))
    await feed(queue, txns, b1)
    await run_until(syncer, lambda: ckpt.applied_ts == b1.commit_ts)
    assert job.ranges == []  # no measurement yet: streamed
    catchup.observe_backlog(2)  # the pumps hold b2 and b3
    await feed(queue, txns, b2, b3)
    await run_until(syncer, lambda: catchup.phase is Phase.DONE)
    assert job.ranges == [(b1.commit_ts, b3.commit_ts, 2)]
    assert ckpt.applied_ts == b3.commit_ts
    assert catchup.status()["trigger"] == "backlog 2 binlogs"


def test_request_is_refused_while_one_is_under_way(tmp_path: Path) -> None:
    catchup = CatchUp(CatchUpSettings(JobSpec(tmp_path, "sqlite:///x")))
    assert catchup.request()
    catchup.begin()
    assert not catchup.request()


async def test_run_job_passes_the_sink_in_the_environment_and_reads_progress(
    tmp_path: Path,
) -> None:
    script = tmp_path / "fakepython"
    script.write_text(
        "#!/bin/sh\n"
        'echo "{\\"event\\": \\"progress\\", \\"argv\\": \\"$*\\"}"\n'
        'echo "sink=$CATCHUP_SINK_URL"\n'
        "exit 75\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "staging").mkdir()
    spec = JobSpec(
        tmp_path / "staging", "mysql://u:secret@h:1/", master="local[1]", python=str(script)
    )
    lines: list[dict[str, Any]] = []
    pids: list[int] = []
    assert await run_job(spec, pids.append, lines.append) == 75
    assert "--master local[1]" in lines[0]["argv"] and "secret" not in lines[0]["argv"]
    assert lines[1] == {"line": "sink=mysql://u:secret@h:1/"}
    assert len(pids) == 1


async def test_a_cancelled_run_job_kills_the_job(tmp_path: Path) -> None:
    script = tmp_path / "fakepython"
    script.write_text("#!/bin/sh\necho started\nexec sleep 60\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    spec = JobSpec(tmp_path / "staging", "sqlite:///x", python=str(script))
    lines: list[dict[str, Any]] = []
    pids: list[int] = []
    task = asyncio.create_task(run_job(spec, pids.append, lines.append))
    await eventually(lambda: bool(lines))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)


async def test_http_trigger_and_status(tmp_path: Path) -> None:
    catchup = CatchUp(CatchUpSettings(JobSpec(tmp_path, "sqlite:///x")))
    state = DrainerState(NodeState.ONLINE)

    def serve(c: CatchUp | None) -> OpsServer:
        r = routes("d1", state, lambda: {}, lambda: False, lambda: 7, c)
        return OpsServer("127.0.0.1", 0, r)

    async with serve(None) as off, aiohttp.ClientSession(base_url=off.url) as s:
        async with s.put("/catchup") as resp:
            assert resp.status == 409 and "not enabled" in (await resp.json())["error"]
        async with s.get("/status") as resp:
            assert "CatchUp" not in await resp.json()  # tidb-binlog's body when off
    async with serve(catchup) as on, aiohttp.ClientSession(base_url=on.url) as s:
        async with s.put("/catchup") as resp:
            assert resp.status == 200
        catchup.begin()
        async with s.put("/catchup") as resp:
            assert resp.status == 409
        async with s.get("/status") as resp:
            body = await resp.json()
    assert body["LastTS"] == 7 and body["CatchUp"]["state"] == "draining"


def test_settings(tmp_path: Path) -> None:
    argv = ["--data-dir", str(tmp_path), "--syncer-sink-uri", "mysql://root@127.0.0.1:3306/"]
    cfg = load(
        DrainerConfig,
        [*argv, "--syncer-catchup-enabled", "--syncer-catchup-lag-threshold", "60"],
        {"DRAINER_SYNCER_CATCHUP_MASTER": "local[2]"},
        "DRAINER",
    )
    c = cfg.syncer.catchup
    assert (c.enabled, c.lag_threshold, c.master) == (True, 60.0, "local[2]")
    assert (c.backlog_threshold, c.backlog_interval) == (0, 30.0)
    cfg = load(
        DrainerConfig,
        [*argv, "--syncer-catchup-enabled", "--syncer-catchup-backlog-threshold", "50000"],
        {"DRAINER_SYNCER_CATCHUP_BACKLOG_INTERVAL": "10"},
        "DRAINER",
    )
    c = cfg.syncer.catchup
    assert (c.backlog_threshold, c.backlog_interval) == (50_000, 10.0)
    with pytest.raises(SettingsError) as bad:
        load(
            DrainerConfig,
            [*argv, "--syncer-catchup-enabled", "--syncer-catchup-backlog-threshold", "-1"],
            {},
            "DRAINER",
        )
    assert "syncer.catchup.backlog-threshold" in str(bad.value)
    assert cfg.catchup_staging() == os.path.join(str(tmp_path), "catchup")
    with pytest.raises(SettingsError) as e:
        load(
            DrainerConfig,
            [
                *("--data-dir", str(tmp_path), "--syncer-sink-uri", "print://"),
                *("--syncer-catchup-enabled", "--syncer-catchup-resume-lag", "600"),
            ],
            {},
            "DRAINER",
        )
    text = str(e.value)
    assert "syncer.catchup.resume-lag" in text and "print://" in text


def test_binlogctl_catchup_drainer_command() -> None:
    cfg = parse(["catchup-drainer", "--node-id", "d1"])
    assert cfg.command is Command.CATCHUP_DRAINER
    assert (cfg.command.kind, cfg.command.verb) == (NodeKind.DRAINER, "catchup")
    assert catchup_url("10.0.0.5:8250", tls=False) == "http://10.0.0.5:8250/catchup"
    with pytest.raises(SettingsError, match="node-id"):
        parse(["catchup-drainer"])


async def test_drain_at_shutdown_does_not_wait_on_binlogs_a_running_job_holds(
    tmp_path: Path,
) -> None:
    """While the job runs, what was merged after the range is not converted, so the stop's
    drain cannot finish: it says so at once instead of spending its whole timeout."""
    sink = RecordingSink()
    started = asyncio.Event()

    async def hanging_job(
        spec: JobSpec,
        on_start: Callable[[int], None],
        on_line: Callable[[dict[str, Any]], None],
    ) -> int:
        on_start(4242)
        started.set()
        await asyncio.Event().wait()  # until the stop cancels it
        return 0

    syncer, queue, _, catchup, _, txns = setup(tmp_path, sink, [], runner=hanging_job)
    await feed(queue, txns, rows(ts(NOW - 500), RowChange.insert(T, {"id": 1, "v": 1})))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(syncer.run())
        await asyncio.wait_for(started.wait(), 10)
        await feed(queue, txns, rows(ts(NOW - 1), RowChange.insert(T, {"id": 2, "v": 2})))
        assert catchup.phase is Phase.RUNNING and catchup.holds_stream
        async with asyncio.timeout(10):  # the drain's own timeout is an hour
            assert await syncer.drain(3600) is False
        task.cancel()
    assert sink.batches == []


async def test_the_jobs_rows_lines_are_its_progress_in_status_and_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    lines = [
        {"event": "progress", "phase": "planned", "rows": 1000},
        {"phase": "rows", "rows_done": 0, "rows_total": 1000, "rate": 0.0, "eta_s": None},
        {"phase": "rows", "rows_done": 300, "rows_total": 1000, "rate": 150.0, "eta_s": 4.7},
        {"phase": "rows", "rows_done": 600, "rows_total": 1000, "rate": 150.0, "eta_s": 2.7},
        {"phase": "rows", "rows_done": 1000, "rows_total": 1000, "rate": 160.0, "eta_s": 0.0},
    ]
    seen: list[dict[str, Any] | None] = []

    async def job(
        spec: JobSpec, on_start: Callable[[int], None], on_line: Callable[[dict[str, Any]], None]
    ) -> int:
        for i, line in enumerate(lines):
            now[0] = 6.0 * i
            on_line({"event": "progress", **line})
            seen.append(catchup.status()["job"])
        return 0

    catchup = CatchUp(
        CatchUpSettings(JobSpec(tmp_path / "s", "sqlite://x")), runner=job, clock=lambda: now[0]
    )
    catchup.begin()
    assert catchup.status()["job"] is None
    caplog.set_level("INFO", logger="services.drainer.catchup")
    await catchup.execute(RangeInfo(0, 0, 1000, 1, ()))
    assert seen[0] is None
    assert seen[2] == {
        "rows_done": 300,
        "rows_total": 1000,
        "percent": 30.0,
        "rate": 150.0,
        "eta_s": 4.7,
    }
    assert catchup.status()["job"]["rows_done"] == 1000
    logged = [r.getMessage() for r in caplog.records if "catch-up job on" in r.getMessage()]
    # the first, then one LOG_EVERY (10 s) later on the fake clock, and the one reaching the total
    assert logged == [
        "catch-up job on (0, 0]: rows 0/1,000 (0%), 0 rows/s",
        "catch-up job on (0, 0]: rows 600/1,000 (60%), 150 rows/s, ETA 3s",
        "catch-up job on (0, 0]: rows 1,000/1,000 (100%), 160 rows/s, done",
    ]
