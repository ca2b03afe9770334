"""The workload on a SQLite upstream (the demo's): bank and mixed runs replicate exactly."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.support.etcd import EtcdProcess
from tests.support.workload_cluster import assert_same_contents, cluster, pull_all, replicate
from tributary.workload import Bank, Mixed, MixedOptions, run_workload, total_balance
from tributary.workload.upstream import open_upstream

pytestmark = pytest.mark.etcd
REPO = (
    Path(__file__).resolve().parents[2]
)  # so that `python -m tributary.workload` finds the package


async def test_sqlite_upstream_bank_and_mixed(etcd: EtcdProcess, tmp_path: Path) -> None:
    bank = Bank("bank", accounts=20)
    mixed = Mixed("mixed", MixedOptions(ddl_ratio=0.1, initial_rows=10))
    async with (
        cluster(etcd, tmp_path) as c,
        open_upstream(f"sqlite://{tmp_path / 'up.db'}", writers=4) as up,
    ):
        bank_stats, mixed_stats = await asyncio.gather(
            run_workload(bank, up, c.client, c.tso, c.history, writers=4, txns=60, seed=3),
            run_workload(mixed, up, c.client, c.tso, c.history, writers=2, txns=60, seed=4),
        )
        assert bank_stats.commits > 10 and mixed_stats.commits > 10
        assert bank_stats.failures == mixed_stats.failures == 0
        assert await total_balance(up, "bank") == bank.expected_total

        items = await pull_all(c, max(bank_stats.max_commit_ts, mixed_stats.max_commit_ts))
        total = bank_stats.commits + bank_stats.ddls + mixed_stats.commits + mixed_stats.ddls
        assert len(items) == total
        await replicate(c, items, tmp_path / "down.db")
        assert await assert_same_contents(c, up, tmp_path / "down.db", "bank") == 20
        assert await assert_same_contents(c, up, tmp_path / "down.db", "mixed") > 0


async def test_the_cli_runs_a_workload(etcd: EtcdProcess, tmp_path: Path) -> None:
    """``python -m tributary.workload`` finds the cluster through etcd and prints its counters."""
    upstream = f"sqlite://{tmp_path / 'up.db'}"
    async with cluster(etcd, tmp_path, pumps=1) as c:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tributary.workload", "--kind", "bank", "--upstream", upstream,
            "--pd-urls", etcd.endpoint, "--txns", "30", "--writers", "2", "--accounts", "10",
            "--seed", "1", "--log-level", "warn",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode == 0, err.decode()[-2000:]
        stats = json.loads(out.decode().splitlines()[-1])
        assert stats["commits"] > 20 and stats["ddls"] == 2 and stats["failures"] == 0
        items = await pull_all(c, stats["max_commit_ts"])
        assert len(items) == stats["commits"] + stats["ddls"]
        async with open_upstream(upstream) as up:
            assert await total_balance(up, "bank") == 10 * 1000
            await replicate(c, items, tmp_path / "down.db")
            assert await assert_same_contents(c, up, tmp_path / "down.db", "bank") == 10
