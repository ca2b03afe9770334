"""Drainer backup and restore, end to end on real processes: real etcd and pumps, a bank workload
writing through the pump client, a drainer into MariaDB ``A``.

While the writers keep going: ``mariadb-dump --single-transaction`` of ``A`` (the checkpoint table
included) restored into a new MariaDB ``B``; ``binlogctl export-drainer-state`` reads the
checkpoint that dump holds (``--sink-url`` of ``B``) and the DDL history up to it; a second
drainer started with ``--initial-state`` continues into ``B`` from there. At the end the checker
finds both downstreams equal to the upstream (no gap, no repeat). Then what is refused, each
with its message: an export of another cluster, an export whose checkpoint is not the one the
downstream holds, an export from a downstream holding no checkpoint of this cluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from services.binlogctl.cli import main as binlogctl
from services.demo.cluster import DrainerNode
from tests.support.pipeline import Pipeline, caught_up, mysql_checkpoint, running_pipeline
from tests.support.waits import until
from tributary.checker import compare
from tributary.drainerstate import dumps, loads
from tributary.workload import open_upstream, run_workload
from tributary.workload.bank import Bank

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.timeout(300)]


def dump(server: MariaDBServer, path: Path) -> None:
    """A consistent dump of the bank and the drainer's checkpoint tables."""
    with path.open("wb") as out:
        subprocess.run(
            ["mariadb-dump", "--single-transaction", f"--host={server.host}",
             f"--port={server.port}", f"--user={server.user}", f"--password={server.password}",
             "--databases", "bank", "tidb_binlog"],
            stdout=out, check=True, timeout=120,
        )  # fmt: skip


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def restore(server: MariaDBServer, path: Path) -> None:
    with path.open("rb") as dump_file:
        subprocess.run(
            ["mariadb", f"--host={server.host}", f"--port={server.port}",
             f"--user={server.user}", f"--password={server.password}"],
            stdin=dump_file, check=True, timeout=120,
        )  # fmt: skip


async def ctl(*argv: str) -> int:
    return await asyncio.to_thread(binlogctl, list(argv))


async def checkpoint(server: MariaDBServer) -> int | None:
    return await mysql_checkpoint(server.host, server.port, server.user, server.password)


async def settled(pipe: Pipeline, up: MariaDBServer, down: MariaDBServer, upto: int) -> None:
    await caught_up(down.host, down.port, down.user, down.password, upto)
    report = await compare(up.dsn(), down.dsn())
    assert report.equal, report.render_text()


async def refused(pipe: Pipeline, name: str, sink: str, state: Path) -> str:
    """Start a drainer from ``state``; it must exit: the tail of its log."""
    node: DrainerNode = await pipe.cluster.start_drainer(
        sink, name=name, extra=["--initial-state", str(state)], wait_ready=False
    )
    code = await asyncio.wait_for(asyncio.to_thread(node.child.proc.wait), 60)
    assert code != 0
    return text(pipe.cluster.root / f"{name}.log")


async def test_drainer_from_an_export_continues_into_a_restored_downstream(
    mariadb_instance: InstanceFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    up, a, b = (mariadb_instance(n) for n in ("upstream", "a", "b"))
    async with (
        running_pipeline(tmp_path, pumps=2) as pipe,
        open_upstream(up.dsn(), writers=8) as upstream,
    ):
        etcd = ",".join(pipe.cluster.etcd.urls) if pipe.cluster.etcd else ""
        await pipe.cluster.start_drainer(a.dsn(), name="a")
        stop = asyncio.Event()
        load = asyncio.create_task(
            run_workload(
                Bank("bank", accounts=100), upstream, pipe.pumps, pipe.tso, pipe.history,
                writers=4, rate=100, seed=5, stop=stop,
            ),
            name="test-bank-load",
        )  # fmt: skip
        try:
            await until(lambda: _replicating(a), within=90)
            await asyncio.sleep(2)
            dumped = tmp_path / "a.sql"
            await asyncio.to_thread(dump, a, dumped)
            await asyncio.to_thread(restore, b, dumped)
            at = await checkpoint(b)
            assert at is not None
            state_file = tmp_path / "state.json"
            capsys.readouterr()
            assert await ctl(
                "-cmd", "export-drainer-state", "-pd-urls", etcd, "-node-id", "a",
                "-sink-url", b.dsn(), "-output", str(state_file),
            ) == 0  # fmt: skip
            said = capsys.readouterr().out
            assert f"checkpoint {at}" in said and "from the downstream" in said, said
            state = loads(text(state_file))
            assert (state.cluster_id, state.commit_ts, state.node_id) == (pipe.cluster_id, at, "a")
            assert state.jobs and all(j.finished_ts <= at for j in state.jobs)
            assert "a:" not in state.sink and b.password not in text(state_file)
            await asyncio.sleep(2)  # the writers go on past the dump before B's drainer starts
            await pipe.cluster.start_drainer(
                b.dsn(), name="b", extra=["--initial-state", str(state_file)]
            )
            await asyncio.sleep(3)
        finally:
            stop.set()
            stats = await load
        assert stats.commits > 100 and stats.failures == 0, stats.as_dict()
        assert stats.max_commit_ts > at
        await settled(pipe, up, a, stats.max_commit_ts)
        await settled(pipe, up, b, stats.max_commit_ts)
        log = text(pipe.cluster.root / "b.log")
        assert f"starting from the exported state {state_file}: after commit ts {at}" in log
        await _refusals(pipe, etcd, state_file, a, mariadb_instance("empty"), tmp_path, capsys)


async def _replicating(server: MariaDBServer) -> bool:
    """The drainer into ``server`` has applied the bank's tables and a checkpoint."""
    if not await checkpoint(server):
        return False
    rows = await server.query(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'bank'"
    )
    return int(rows[0][0]) > 0


async def _refusals(
    pipe: Pipeline,
    etcd: str,
    state_file: Path,
    a: MariaDBServer,
    empty: MariaDBServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = loads(text(state_file))
    other = tmp_path / "other-cluster.json"
    await asyncio.to_thread(
        other.write_text, dumps(dataclasses.replace(state, cluster_id=state.cluster_id + 1))
    )
    log = await refused(pipe, "c", empty.dsn(), other)
    assert f"was exported from cluster {state.cluster_id + 1}" in log, log[-3000:]
    assert f"etcd is cluster {pipe.cluster_id}" in log
    # A's downstream went on past the export: its checkpoint is not the export's
    log = await refused(pipe, "d", a.dsn(), state_file)
    assert f"continues after commit ts {state.commit_ts}" in log, log[-3000:]
    assert "the downstream already holds the checkpoint" in log
    # the export reads a downstream holding no checkpoint of this cluster: a clear failure
    capsys.readouterr()
    code = await ctl(
        "-cmd", "export-drainer-state", "-pd-urls", etcd, "-sink-url", empty.dsn(),
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and f"holds no checkpoint of cluster {pipe.cluster_id}" in err, err
    assert await ctl("-cmd", "export-drainer-state", "-pd-urls", etcd, "-node-id", "a") == 1
    assert "drainer a is online" in capsys.readouterr().err
