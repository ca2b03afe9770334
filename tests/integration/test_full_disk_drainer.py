"""A drainer writing binlog files (``file://``) or staging a catch-up range onto a real, small
filesystem that fills up.

Its data dir (savepoint) and the sink's directory share the disk. With no byte left the sink
refuses each batch with the disk named as the cause, the drainer retries it and stays up, and
neither checkpoint passes what is in the files; once space returns it goes on, and the files
hold every committed transaction exactly once, in commit order. A catch-up whose staging dir
is full stops the drainer with the directory and the disk named, its checkpoint where it was; a
restart once space returns stages the range again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.drainer.catchup import CatchUp, CatchUpSettings, Phase
from services.drainer.catchup_job import JobSpec
from services.drainer.checkpoint import FileCheckpoint
from services.drainer.item import PulledBinlogItem
from services.drainer.progress import Checkpointer
from services.drainer.syncer import Syncer
from tests.support.drainer import (
    FAST_PUMP,
    VERSION,
    create_merge_table,
    drainer_config,
    running_drainer,
    write_direct,
)
from tests.support.etcd import EtcdProcess
from tests.support.fakes import MemoryCheckpoint, RecordingSink
from tests.support.pump import pump_config, running_pump
from tests.support.smalldisk import small_disk
from tests.support.waits import eventually
from tributary.change import RowChange, TableInfo, Txn
from tributary.config.drainer import SyncerConfig
from tributary.coord.etcd import EtcdKv
from tributary.sinks.file import pbcodec
from tributary.sinks.file.binlogfile import Record, read_directory
from tributary.sinks.file.sink import load_savepoint
from tributary.staging import StagingError, read_range
from tributary.tso.client import TsoClient
from tributary.wire.ts import compose

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(180)]

MiB = 1 << 20


def files_commit_ts(directory: Path) -> list[int]:
    """The commit ts of every record up to the sink's savepoint (all of them must be whole)."""
    saved = load_savepoint(directory)
    assert saved is not None
    items = list(read_directory(directory, upto=saved.position))
    assert all(isinstance(i, Record) for i in items), items
    return [pbcodec.commit_ts_of(i.payload) for i in items if isinstance(i, Record)]


def saved_ts(directory: Path) -> int:
    saved = load_savepoint(directory)
    return saved.commit_ts if saved is not None else 0


async def test_drainer_file_sink_on_a_full_disk_retries_and_loses_nothing(
    tmp_path: Path, etcd: EtcdProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="services.drainer")
    with small_disk(tmp_path / "disk", 32 * MiB) as disk:
        files, data = disk.root / "binlogs", disk.root / "drainer"
        syncer = dataclasses.replace(SyncerConfig(), sink_uri=f"file://{files}?segment-size=1MiB")
        pcfg = pump_config(tmp_path / "pump", etcd.endpoint, **FAST_PUMP)
        async with (
            EtcdKv.connect([etcd.endpoint]) as kv,
            running_pump(pcfg) as pump,
            TsoClient(kv, pump.started.cluster_id) as tso,
        ):
            assert await create_merge_table(kv) == VERSION
            async with running_drainer(drainer_config(data, etcd.endpoint, syncer=syncer)) as d:
                before = await write_direct(pump, tso, 20)
                await eventually(lambda: saved_ts(files) >= max(before), within=60)

                disk.fill_to(0)
                during = await write_direct(pump, tso, 20)
                await eventually(lambda: "No space left on device" in caplog.text, within=60)
                assert "sink unavailable for the batch" in caplog.text
                assert not d.task.done()
                # Nothing past the files: the sink's savepoint names their end, and the
                # drainer's own checkpoint does not pass the sink's.
                held = files_commit_ts(files)
                assert held == sorted(held) and saved_ts(files) == held[-1]
                assert saved_ts(files) < max(during)
                assert (await FileCheckpoint(data).load() or 0) <= saved_ts(files)

                disk.release()
                after = await write_direct(pump, tso, 5)
                await eventually(lambda: saved_ts(files) >= max(after), within=60)
                assert not d.task.done()

            everything = sorted([*before, *during, *after])
            assert files_commit_ts(files) == everything
            assert (await FileCheckpoint(data).load() or 0) >= max(everything)


# -- the catch-up's staging dir -------------------------------------------------------------

T = TableInfo.build("db", "t", [("id", "bigint")], ["id"])
NOW = 10_000.0  # the catch-up's wall clock, seconds


class StagedRanges:
    """Stands in for the Spark job (not what is proved here): reads the staged range, exit 0."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int, int]] = []

    async def __call__(
        self, spec: JobSpec, on_start: Callable[[int], None], on_line: Callable[[Any], None]
    ) -> int:
        info = read_range(spec.staging)
        self.ranges.append((info.start_ts, info.end_ts, info.rows))
        return 0


def backlog_syncer(
    staging: Path, sink: RecordingSink, job: StagedRanges, txns: list[Txn]
) -> tuple[Syncer, Checkpointer, CatchUp]:
    """A syncer 500 s behind (so it stages a catch-up range) with ``txns`` merged."""
    by_ts = {t.commit_ts: t for t in txns}

    async def convert(item: PulledBinlogItem) -> Txn:
        return by_ts[item.commit_ts]

    settings = CatchUpSettings(
        JobSpec(staging, "sqlite:///nowhere"), lag_threshold=100.0, resume_lag=10.0, idle=0.2
    )
    catchup = CatchUp(settings, runner=job, wall=lambda: NOW)
    queue: asyncio.Queue[PulledBinlogItem] = asyncio.Queue()
    for t in txns:
        queue.put_nowait(PulledBinlogItem(t.commit_ts, t.start_ts, b"", False))
    ckpt = Checkpointer(MemoryCheckpoint(), compose(1000, 0))
    return Syncer(queue, sink, ckpt, convert, catchup=catchup), ckpt, catchup


async def test_catch_up_staging_on_a_full_disk_stops_clearly_then_resumes(tmp_path: Path) -> None:
    first = int((NOW - 500) * 1000)  # 500 s behind: a catch-up range
    txns = [
        Txn(compose(first + i, 0), compose(first + i, 0) - 1, (RowChange.insert(T, {"id": i}),))
        for i in range(1, 201)
    ]
    with small_disk(tmp_path / "disk", 8 * MiB) as disk:
        staging = disk.root / "staging"
        sink, job = RecordingSink(), StagedRanges()
        disk.fill_to(0)
        syncer, ckpt, catchup = backlog_syncer(staging, sink, job, txns)
        with pytest.raises(ExceptionGroup) as stopped:
            async with asyncio.timeout(30):
                await syncer.run()
        assert stopped.group_contains(StagingError)
        assert catchup.phase is Phase.FAILED
        assert str(staging) in catchup.error and "No space left on device" in catchup.error
        assert (ckpt.applied_ts, sink.ckpt, sink.batches, job.ranges) == (
            compose(1000, 0),
            None,
            [],
            [],
        )

        disk.release()  # space returns; the drainer restarts from the same checkpoint
        syncer, ckpt, catchup = backlog_syncer(staging, sink, job, txns)
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(syncer.run())
            try:
                await eventually(lambda: ckpt.applied_ts == txns[-1].commit_ts, within=30)
            finally:
                task.cancel()
        assert job.ranges == [(compose(1000, 0), txns[-1].commit_ts, len(txns))]
        assert catchup.phase is Phase.DONE
