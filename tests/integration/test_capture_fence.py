"""A capture cut from etcd stops writing downstream before its tables can move (the lease fence).

Real processes: etcd and two ``binlog-cdc server`` captures, each in a network namespace of its
own (``tests/support/netns.py``), the upstream and downstream MariaDB in the root namespace,
reached through the bridge. A changefeed into the downstream is spread over both captures; the
capture holding ``#ddl`` (and tables) is cut from etcd, not from MariaDB, under a write load,
and a ``DROP COLUMN`` follows once its spans moved. Proves: its lease expires and the other capture
takes every span; the cut capture's fence falls, and the downstream's general log shows no
statement of it (sessions come from its namespace's address) from the moment etcd deleted its
key until the heal; after the heal the downstream equals the upstream and the changefeed is
normal (the DDL applied once, the rows around it in order). Also: the MySQL sink's write
gate, refusing at COMMIT, leaves nothing of the batch and the sink usable.

Needs root (``ip netns``, veth, a bridge, nftables); skips with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from tests.support import netns
from tests.support.capture import shop_equal, shop_load, wait_for
from tests.support.netns_cluster import NetCluster, Proc, netns_cluster
from tributary.cdc.keys import Keys
from tributary.change import RowChange, TableInfo, Txn
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import WatchEventKind
from tributary.sinks import SinkOptions, WriteRefused
from tributary.sinks.mysql.sink import open_url

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(240)]

CAPTURE_PORT = 8300
TABLES = [f"t{i}" for i in range(4)]
READS = ("SELECT", "SET", "SHOW")


@pytest.fixture(scope="module")
def namespaces_possible() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)


async def _get(http: aiohttp.ClientSession, proc: Proc, path: str) -> Any:
    async with http.get(proc.node.url(CAPTURE_PORT) + path) as r:
        return await r.json()


async def _held(http: aiohttp.ClientSession, proc: Proc) -> dict[str, set[str]]:
    """Capture id -> the spans it holds, as ``proc`` sees the cluster."""
    try:
        data = await _get(http, proc, "/api/v2/captures")
    except (aiohttp.ClientError, TimeoutError):
        return {}
    return {i["id"]: {s for v in i["tables"].values() for s in v} for i in data["items"]}


def _start_capture(cluster: NetCluster, name: str, upstream: str) -> Proc:
    node = cluster.net.add(name)
    argv = [
        sys.executable,
        *("-m", "services.capture", "server", "--etcd", cluster.etcd_url),
        *("--addr", node.addr(CAPTURE_PORT), "--upstream", upstream, "--capture-id", name),
        *("--capture-session-ttl", "3", "--checkpoint-interval", "0.2"),
    ]
    child = cluster.supervisor.start(
        name, cluster.net.argv(node, argv), cluster.root / f"{name}.log"
    )
    return Proc(node, child)


async def _deleted_at(kv: EtcdKv, key: bytes, seen: asyncio.Event) -> float:
    """Wall time at which the watch saw ``key`` deleted."""
    async with contextlib.aclosing(kv.watch_prefix(key)) as events:
        seen.set()
        async for event in events:
            if event.kind is WatchEventKind.DELETE and event.key == key:
                return time.time()
    raise AssertionError("watch ended")


async def test_a_capture_cut_from_etcd_stops_writing_before_its_tables_move(
    namespaces_possible: None, tmp_path: Path, mariadb_instance: InstanceFactory
) -> None:
    async with netns_cluster(tmp_path) as cluster:
        await cluster.start_etcd()
        assert cluster.etcd is not None
        host = cluster.net.gateway
        up = mariadb_instance("up", "--binlog-row-metadata=FULL", host=host)
        down = mariadb_instance("down", host=host)
        for db in (up, down):
            await db.execute("CREATE DATABASE shop")
            for t in TABLES:
                await db.execute(f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v INT, x INT)")
                await db.execute(f"INSERT INTO shop.{t} VALUES (1, 0, 0), (2, 0, 0)")
        upstream = up.dsn() + "?server-id=4242"
        caps = {n: _start_capture(cluster, n, upstream) for n in ("cap-a", "cap-b")}
        for proc in caps.values():
            await cluster.wait_ready(proc, proc.node.url(CAPTURE_PORT) + "/ready")
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
            EtcdKv.connect([cluster.etcd_url]) as kv,
        ):
            await _run(cluster, caps, up, down, http, kv)


async def _run(
    cluster: NetCluster,
    caps: dict[str, Proc],
    up: MariaDBServer,
    down: MariaDBServer,
    http: aiohttp.ClientSession,
    kv: EtcdKv,
) -> None:
    first = caps["cap-a"]
    body = {"changefeed_id": "cf-1", "sink_uri": down.dsn()}

    async def created() -> bool:
        try:
            async with http.post(
                first.node.url(CAPTURE_PORT) + "/api/v2/changefeeds", json=body
            ) as r:
                return r.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    await wait_for(created, 60, "the changefeed created")
    spans = {"#ddl", *(f"shop.{t}" for t in TABLES)}

    async def spread() -> dict[str, set[str]] | None:
        held = await _held(http, first)
        ok = all(held.get(n) for n in caps) and spans <= set().union(*held.values())
        return held if ok else None

    held = await wait_for(spread, 60, "the spans spread over both captures")
    victim = next(n for n in caps if "#ddl" in held[n])
    other = next(n for n in caps if n != victim)
    assert held[victim] - {"#ddl"}, f"{victim} holds tables too: {held}"

    await down.execute("SET GLOBAL log_output = 'TABLE'")
    await down.execute("SET GLOBAL general_log = 1")
    stop = asyncio.Event()
    load = asyncio.create_task(
        shop_load(up, TABLES, stop, seed=16, most_tables=2, keys=30), name="load"
    )
    watching = asyncio.Event()
    deletion = asyncio.create_task(
        _deleted_at(kv, Keys().capture_key(victim), watching), name="watch-victim"
    )
    try:
        await watching.wait()
        await asyncio.sleep(1.0)  # rows flow through both captures
        cluster.net.partition(caps[victim].node, cluster.etcd.node)  # type: ignore[union-attr]
        async with asyncio.timeout(60):
            deleted = await deletion

        async def moved() -> bool:
            held = await _held(http, caps[other])
            return held.get(other, set()) >= spans and victim not in held

        await wait_for(moved, 60, f"every span moved to {other}")
        await asyncio.sleep(1.0)  # the cut capture would write now if it were not fenced
        await up.execute("ALTER TABLE shop.t0 DROP COLUMN x")  # applied by the new holder
        await asyncio.sleep(1.0)
        healed = time.time()
        cluster.net.heal_all()
        stop.set()
        written = await load
        assert written > 0
        await wait_for(
            lambda: shop_equal(up, down, len(TABLES)), 90, "the downstream equal to the upstream"
        )
    finally:
        stop.set()
        cluster.net.heal_all()
        for task in (load, deletion):
            task.cancel()
        await asyncio.gather(load, deletion, return_exceptions=True)
    state = await _get(http, caps[other], "/api/v2/changefeeds/cf-1")
    assert state["state"] == "normal", state

    ip = caps[victim].node.ip
    rows = await down.query(
        "SELECT UNIX_TIMESTAMP(event_time), argument FROM mysql.general_log "
        "WHERE command_type = 'Query' AND user_host LIKE %s "
        "AND UNIX_TIMESTAMP(event_time) BETWEEN %s AND %s ORDER BY event_time",
        (f"%[{ip}]%", deleted, healed),
    )
    await down.execute("SET GLOBAL general_log = 0")
    writes = [
        (float(at), text[:120])
        for at, text in rows
        if not (text.decode() if isinstance(text, bytes) else text)
        .lstrip()
        .upper()
        .startswith(READS)
    ]
    assert writes == [], f"{victim} wrote downstream after its key was deleted: {writes}"
    log = (cluster.root / f"{victim}.log").read_text(errors="replace")
    assert "lease fence fell" in log


ITEMS = TableInfo.build("gate", "items", [("id", "bigint"), ("v", "varchar(20)")], ["id"])


async def test_the_mysql_sink_refused_at_commit_leaves_nothing(
    mariadb_instance: InstanceFactory,
) -> None:
    down = mariadb_instance("down")
    await down.execute("CREATE DATABASE gate")
    await down.execute("CREATE TABLE gate.items (id BIGINT PRIMARY KEY, v VARCHAR(20))")
    sink = await open_url(urlsplit(down.dsn()), SinkOptions(7))
    asked = 0

    def gate() -> None:  # lets BEGIN and the statements through, refuses the COMMIT
        nonlocal asked
        asked += 1
        if asked == 2:
            raise WriteRefused("fenced")

    try:
        sink.write_gate = gate
        txn = Txn(100, 99, (RowChange.insert(ITEMS, {"id": 1, "v": "a"}),))
        with pytest.raises(WriteRefused):
            await sink.apply([txn])
        assert await down.query("SELECT id FROM gate.items") == []
        assert await sink.checkpoint() is None
        await sink.apply([txn])  # the gate lets it through now
        assert await down.query("SELECT id, v FROM gate.items") == [(1, "a")]
        assert await sink.checkpoint() == 100
    finally:
        await sink.close()
