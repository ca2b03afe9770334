"""PD's own Go client (github.com/tikv/pd/client, through tests/go/pdcheck) against our TSO:
the cluster ID from GetMembers, a few thousand strictly increasing timestamps from the Tso
stream, across a SIGKILL of the TSO leader (real binlog-tso processes, real etcd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import gobin
from tests.support.etcd import EtcdProcess
from tests.support.tso import members_up, tso_process
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def go_bin() -> Path:
    return gobin.build()


async def test_pd_go_client_across_a_tso_leader_kill(
    go_bin: Path, etcd: EtcdProcess, tmp_path: Path
) -> None:
    with (
        tso_process(etcd.endpoint, tmp_path / "tso-a.log") as (url_a, proc_a),
        tso_process(etcd.endpoint, tmp_path / "tso-b.log") as (url_b, proc_b),
    ):
        leader = await members_up(url_a, 2)
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            cluster_id = await read_cluster_id(kv)
        run = await gobin.start(
            go_bin,
            "pdcheck",
            tmp_path / "pdcheck.log",
            f"-pd-urls={url_a},{url_b}",
            "-count=4000",
            "-pause-at=2000",
            "-deadline=120s",
        )
        try:
            await run.wait_line("paused", within=60)
            (proc_a if leader == url_a else proc_b).kill()  # SIGKILL: the lease has to expire
            survivor = url_b if leader == url_a else url_a
            assert run.proc.stdin is not None
            run.proc.stdin.write(b"go\n")
            await run.proc.stdin.drain()
            summary = await run.summary(within=180)
        finally:
            run.kill()
        assert summary["cluster_id"] == cluster_id
        assert summary["timestamps"] == 4000
        assert summary["increasing"] and summary["distinct"], summary
        assert await members_up(survivor, 1) == survivor
