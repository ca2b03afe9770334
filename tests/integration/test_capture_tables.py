"""Tables spread over captures, for real: etcd, ``binlog-cdc server`` processes, MariaDB both ends.

Proves, under a write load over six tables (transactions touching one to three tables,
inserts, updates and deletes on a small key space) with DDL mid-run (ALTER TABLE of a
scheduled table, CREATE TABLE of a new one and rows into it): a changefeed into MySQL is
spread over three captures; one of them killed with SIGKILL has its tables moved to the
others once its session expires; a fourth capture joining gets tables (rebalance); a drain
through the API and the CLI empties a capture, its count falling to 0; the checker then says
the downstream equals the upstream, table by table. ``capture list`` and ``processor list``
show the tables of each capture, and no table of a system schema (MariaDB's ``sys.sys_config``)
is among them.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import pytest

from tests.support.capture import Captures, shop_equal, shop_load, wait_for, wait_owner

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
TABLES = [f"t{i}" for i in range(6)]


async def _held(c: Captures) -> dict[str, list[str]]:
    """Capture id -> the spans it holds (``capture list``)."""
    data = await asyncio.to_thread(c.cli, "capture", "list")
    return {i["id"]: sorted(s for v in i["tables"].values() for s in v) for i in data["items"]}


async def _drain(port: int, capture: str) -> int:
    url = f"http://127.0.0.1:{port}/api/v2/captures/{capture}/drain"
    async with aiohttp.ClientSession() as s, s.post(url) as r:
        assert r.status == 202, await r.text()
        return int((await r.json())["current_table_count"])


async def test_tables_move_on_kill_join_and_drain_and_stay_equal(
    etcd: EtcdProcess, tmp_path: Path, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    c = Captures(etcd, up.dsn() + "?server-id=4242", tmp_path)
    try:
        await _run(c, up, down)
    finally:
        for proc in c.procs.values():
            proc.kill()
            proc.wait()


async def _run(c: Captures, up: MariaDBServer, down: MariaDBServer) -> None:
    for name in ("c0", "c1", "c2"):
        c.start(name)
    owner = await wait_owner(c, 60)
    await up.execute("CREATE DATABASE shop")
    for table in TABLES:
        await up.execute(f"CREATE TABLE shop.{table} (id INT PRIMARY KEY, v INT)")
        await up.execute(f"INSERT INTO shop.{table} VALUES (1, 0), (2, 0)")
    await down.execute("CREATE DATABASE shop")
    for table in TABLES:
        await down.execute(f"CREATE TABLE shop.{table} (id INT PRIMARY KEY, v INT)")
        await down.execute(f"INSERT INTO shop.{table} VALUES (1, 0), (2, 0)")
    created = c.cli("changefeed", "create", "-c", "cf-1", "--sink-uri", down.dsn())
    assert created["state"] == "normal"

    stop, late = asyncio.Event(), asyncio.Event()
    load = asyncio.create_task(
        shop_load(up, TABLES, stop, seed=17, most_tables=3, keys=40, mixed=True, late=late),
        name="load",
    )
    spans = {"#ddl", *(f"shop.{t}" for t in TABLES)}

    async def spread() -> dict[str, list[str]] | None:
        held = await _held(c)
        ok = all(held.get(n) for n in ("c0", "c1", "c2"))
        return held if ok and spans <= {s for v in held.values() for s in v} else None

    held = await wait_for(spread, 60, "the tables spread over c0, c1 and c2")
    # MariaDB's sys.sys_config and mysql.* pass '*.*' but are system schemas: not scheduled
    assert {s for v in held.values() for s in v} == spans
    victim = next(n for n in ("c0", "c1", "c2") if n != owner)
    c.procs[victim].send_signal(9)  # SIGKILL: no resign, no revoke
    c.procs.pop(victim).wait()
    c.ports.pop(victim)
    c.start("c3")

    await up.execute("ALTER TABLE shop.t2 ADD COLUMN w INT NOT NULL DEFAULT 7")
    await up.execute("CREATE TABLE shop.late (n INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    late.set()

    async def moved() -> bool:
        held = await _held(c)
        return victim not in held and bool(held.get("c3"))

    await wait_for(moved, 60, f"{victim}'s tables moved and c3 given some")
    drained = next(n for n in ("c0", "c1", "c2") if n not in (owner, victim))
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "services.capture", "cli", "--server", c.any_server(),
         "capture", "drain", "-p", drained],
        cwd=ROOT, capture_output=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr.decode()
    port = c.ports[owner]
    await wait_for(lambda: _zero(port, drained), 60, f"{drained} drained")
    processors = c.cli("processor", "list")["items"]
    assert all(p["capture_id"] != drained for p in processors)
    listed = {s for p in processors for s in p["table_ids"]}
    assert spans <= listed <= spans | {"shop.late"}

    stop.set()
    written = await load
    assert written > 0
    await wait_for(
        lambda: shop_equal(up, down, len(TABLES) + 1), 60, "the downstream equal to the upstream"
    )
    status = c.cli("changefeed", "query", "-c", "cf-1")
    assert status["state"] == "normal"


async def _zero(port: int, capture: str) -> bool:
    return await _drain(port, capture) == 0
