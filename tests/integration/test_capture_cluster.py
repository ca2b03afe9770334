"""The capture cluster for real: etcd, three ``binlog-cdc server`` processes, MariaDB both ends.

Proves, in one run (lease TTL 2 s to keep it short): an owner is elected; changefeed create
through the CLI replicates DDL and rows into the downstream (equal by ``checker.compare``);
kill -9 of the owner elects a new owner within 15 s and the changefeed keeps going; kill -9 of
the capture running the changefeed moves it and the downstream converges equal; CLI pause
stops replication, update changes the changefeed, resume catches up; stopping every capture
and starting three new ones resumes from the checkpoint (nothing lost, still equal); CLI
remove deletes the changefeed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import pytest

from tests.support.capture import Captures, get_json, wait_owner
from tests.support.etcd import EtcdProcess
from tributary.checker.compare import compare
from tributary.checker.errors import CheckerError

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def captures(
    etcd: EtcdProcess, tmp_path: Path, mariadb_instance: InstanceFactory
) -> Iterator[tuple[Captures, MariaDBServer, MariaDBServer]]:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    cluster = Captures(etcd, up.dsn() + "?server-id=4242", tmp_path)
    try:
        yield cluster, up, down
    finally:
        for proc in cluster.procs.values():
            proc.kill()
            proc.wait()


async def _runner(c: Captures) -> str:
    async with asyncio.timeout(30):
        while True:
            data = await get_json(next(iter(c.ports.values())), "/api/v2/processors")
            live = [i["capture_id"] for i in data["items"] if i["capture_id"] in c.ports]
            if live:
                return str(live[0])
            await asyncio.sleep(0.2)


async def _converged(up: MariaDBServer, down: MariaDBServer, rows: int) -> None:
    async with asyncio.timeout(60):
        while True:
            try:
                report = await compare(up.dsn("shop"), down.dsn("shop"))
                if report.equal and report.tables:
                    got = await down.query("SELECT COUNT(*) FROM shop.t")
                    if got[0][0] == rows:
                        return
            except CheckerError:  # the downstream schema may not exist yet
                pass
            await asyncio.sleep(0.5)


async def _insert(up: MariaDBServer, start: int, n: int) -> int:
    async with up.connect("shop") as conn, conn.cursor() as cur:
        for i in range(start, start + n, 5):
            await cur.execute("BEGIN")
            for j in range(i, min(i + 5, start + n)):
                await cur.execute("INSERT INTO t VALUES (%s, %s)", (j, f"v{j}"))
            await cur.execute("COMMIT")
    return start + n


async def test_cluster_failover_cli_and_restart(
    captures: tuple[Captures, MariaDBServer, MariaDBServer],
) -> None:
    c, up, down = captures
    for name in ("c0", "c1", "c2"):
        c.start(name)
    owner = await wait_owner(c, 60)

    created = c.cli("changefeed", "create", "-c", "cf-1", "--sink-uri", down.dsn())
    assert created["id"] == "cf-1" and created["state"] == "normal"
    assert created["source_position"]
    await up.execute("CREATE DATABASE shop")
    await up.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20))")
    n = await _insert(up, 1, 20)
    await _converged(up, down, n - 1)

    c.kill(owner)
    n = await _insert(up, n, 10)
    new_owner = await wait_owner(c, 60, not_=owner)  # the failover happens, however long
    assert new_owner != owner
    await _converged(up, down, n - 1)

    runner = await _runner(c)
    c.kill(runner)
    n = await _insert(up, n, 10)
    c.start("c3")
    assert await _runner(c) != runner
    await _converged(up, down, n - 1)

    c.cli("changefeed", "pause", "-c", "cf-1")
    assert c.cli("changefeed", "query", "-c", "cf-1")["state"] == "stopped"
    n = await _insert(up, n, 10)
    await asyncio.sleep(2)
    assert (await down.query("SELECT COUNT(*) FROM shop.t"))[0][0] == n - 11
    updated = c.cli(
        "changefeed", "update", "-c", "cf-1", "--sink-uri", down.dsn() + "?worker-count=4"
    )
    assert updated["sink_uri"].endswith("worker-count=4")
    c.cli("changefeed", "resume", "-c", "cf-1")
    await _converged(up, down, n - 1)

    before = c.cli("changefeed", "query", "-c", "cf-1")["checkpoint_tso"]
    c.stop_all()
    n = await _insert(up, n, 10)
    for name in ("c4", "c5", "c6"):
        c.start(name)
    await wait_owner(c, 60)
    await _converged(up, down, n - 1)
    after = c.cli("changefeed", "query", "-c", "cf-1")
    assert after["checkpoint_tso"] >= before and after["state"] == "normal"
    assert [i["id"] for i in c.cli("changefeed", "list")["items"]] == ["cf-1"]
    assert {i["id"] for i in c.cli("capture", "list")["items"]} == {"c4", "c5", "c6"}

    c.cli("changefeed", "remove", "-c", "cf-1")
    assert c.cli("changefeed", "list")["items"] == []


async def test_unknown_changefeed_config_keys_are_refused_by_name(
    captures: tuple[Captures, MariaDBServer, MariaDBServer], tmp_path: Path
) -> None:
    c, _up, down = captures
    c.start("c0")
    await wait_owner(c, 60)
    toml = tmp_path / "cf.toml"
    toml.write_text(
        'case-sensitive = true\n[filter]\nrules = ["shop.*"]\n[mounter]\nworker-num = 16\n'
    )
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "services.capture", "cli", "--server", c.any_server(),
         "changefeed", "create", "-c", "cf-x", "--sink-uri", down.dsn(), "--config", str(toml)],
        cwd=ROOT, capture_output=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert "config.mounter: rows are decoded" in (out.stdout + out.stderr).decode()
    body = {"changefeed_id": "cf-y", "sink_uri": down.dsn(), "sink-uri": "typo"}
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"http://{c.any_server()}/api/v2/changefeeds", json=body) as r,
    ):
        assert r.status == 400
        assert "'sink-uri'" in await r.text()
    assert c.cli("changefeed", "list")["items"] == []
