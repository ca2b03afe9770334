"""Our pumps beside a Go pump in one etcd, as in a take-over from tidb-binlog.

The Go pump is ``GoStylePump`` (``tests/support/tidb_binlog_go.py``): ``binlog.Pump`` answering
with the bytes tidb-binlog's pump sends, and its etcd record rewritten every heartbeat in the
JSON a Go pump writes (``isAlive`` false, ``label`` null). A real pump of ours, a real etcd and a
real drainer process: binlogctl lists the Go pump, the pump client (TiDB's part) writes to both
pumps, the drainer pulls both and merges them into one commit-ordered stream with every
transaction once; then the Go pump records ``offline`` (what it does at the end of binlogctl's
``offline-pump``, once every drainer's checkpoint in etcd has passed its binlogs, which the
drainer's record shows), leaves, and the drainer goes on without it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.binlogctl.cli import main as binlogctl
from tests.support.pipeline import ORDERS, Pipeline, commit, ddl, row, running_pipeline
from tests.support.tidb_binlog_go import GoStylePump, go_read_status, go_status_json
from tests.support.waits import eventually, until
from tributary.ddlhistory import Action
from tributary.registry.status import NodeKind, node_key
from tributary.sinks.file import pbcodec
from tributary.sinks.file.binlogfile import Record, read_directory
from tributary.sinks.file.sink import load_savepoint

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(240)]

GO_ID = "go-pump:8250"  # a Go pump's node id: hostname:port


@contextlib.asynccontextmanager
async def go_pump(pipe: Pipeline) -> AsyncIterator[tuple[GoStylePump, asyncio.Event]]:
    """A Go pump serving, its record kept ``online`` by a heartbeat every 0.5 s (2 s in Go)
    until the event is set; then the record is left as it is and the server stops."""
    pump = GoStylePump(pipe.cluster_id, pipe.tso.get_ts)
    await pump.start()
    done = asyncio.Event()

    async def heartbeat() -> None:
        while not done.is_set():
            stored = pump.commit_ts()
            record = go_status_json(
                GO_ID, pump.addr, "online", max(stored, default=0), await pipe.tso.get_ts()
            )
            await pipe.kv.put(node_key(NodeKind.PUMP, GO_ID), record)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.5)

    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(heartbeat(), name="test-go-pump-heartbeat")
            try:
                yield pump, done
            finally:
                done.set()
    finally:
        await pump.stop()


def written(directory: Path) -> list[int]:
    return [
        pbcodec.decode_txn(r.payload).commit_ts
        for r in read_directory(directory)
        if isinstance(r, Record)
    ]


async def test_a_go_pump_is_listed_written_to_merged_and_taken_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "files"
    async with running_pipeline(tmp_path, pumps=1) as pipe, go_pump(pipe) as (go, leave):
        etcd = ",".join(pipe.cluster.etcd.urls) if pipe.cluster.etcd else ""
        await eventually(lambda: GO_ID in pipe.pumps.pumps.available, within=30)
        code = await asyncio.to_thread(binlogctl, ["-cmd", "pumps", "-pd-urls", etcd])
        assert code == 0
        listed = {
            line.split()[0]: line.split()[1:3]
            for line in capsys.readouterr().out.split("\n")[1:]
            if line.strip()
        }
        assert listed[GO_ID] == [go.addr, "online"]

        first = await pipe.tso.get_ts()
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        txns = [await commit(pipe, row(ORDERS.id, version, rid)) for rid in range(1, 11)]
        drainer = await pipe.cluster.start_drainer(
            f"file://{out}", extra=["--initial-commit-ts", str(first)]
        )
        txns += [await commit(pipe, row(ORDERS.id, version, rid)) for rid in range(11, 21)]
        on_go = set(go.commit_ts())
        assert on_go and set(txns) - on_go, "the pump client wrote to both pumps"
        assert go.pulls and min(go.pulls) == first  # PullBinlogReq.startFrom.offset

        def delivered(upto: int) -> bool:
            saved = load_savepoint(out)
            return saved is not None and saved.commit_ts >= upto

        await eventually(lambda: delivered(txns[-1]), within=60)
        # what the Go pump's offline wait compares: every drainer's maxCommitTS in etcd, read
        # as Go reads the record, at or past the pump's max commit ts
        key = node_key(NodeKind.DRAINER, "drainer")

        async def drainer_past_go_pump() -> bool:
            record = await pipe.kv.get(key)
            return record is not None and go_read_status(record.value).max_commit_ts >= max(on_go)

        await until(drainer_past_go_pump, within=30)
        leave.set()
        stored = go.commit_ts()
        await pipe.kv.put(
            node_key(NodeKind.PUMP, GO_ID),
            go_status_json(GO_ID, go.addr, "offline", max(stored), await pipe.tso.get_ts()),
        )
        await eventually(lambda: GO_ID not in pipe.pumps.pumps.available, within=30)
        await go.stop()  # gone: a drainer still merging it would stall
        txns += [await commit(pipe, row(ORDERS.id, version, rid)) for rid in range(21, 26)]
        assert set(go.commit_ts()) == set(stored)
        await eventually(lambda: delivered(txns[-1]), within=60)
        assert await drainer.child.stop(30) == 0

    commits = written(out)
    dml = [ts for ts in commits if ts in set(txns)]
    assert dml == sorted(txns), "every transaction once, in commit order"
    assert commits == sorted(commits) and len(commits) == len(set(commits))
