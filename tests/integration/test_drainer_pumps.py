"""The drainer against real pumps and a real etcd: every committed transaction reaches the sink
exactly once in commit-ts order, through idle pumps, joining pumps, pumps going offline or
restarting, and a drainer restart from its checkpoint."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from services.drainer.checkpoint import FileCheckpoint
from tests.support.drainer import (
    FAST_PUMP,
    VERSION,
    InOrderSink,
    create_merge_table,
    drainer_config,
    row_value,
    running_drainer,
    write_direct,
)
from tests.support.etcd import EtcdProcess
from tests.support.pump import RunningPump, pump_config, running_pump
from tests.support.waits import eventually, until
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv
from tributary.pumpclient import PumpsClient
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import ROOT, NodeKind, NodeState, NodeStatus
from tributary.tso.client import TsoClient

pytestmark = pytest.mark.etcd


async def write_txns(client: PumpsClient, tso: TsoClient, n: int) -> dict[int, int]:
    """Commit ``n`` concurrent transactions through the pump client: commit ts -> start ts."""

    async def one(i: int) -> tuple[int, int]:
        start = await tso.get_ts()
        await client.prewrite(start, row_value(VERSION, start), b"k%d" % i)
        commit_ts = await tso.get_ts()
        await client.commit(start, commit_ts)
        return commit_ts, start

    return dict(await asyncio.gather(*(one(i) for i in range(n))))


async def delivered(sink: InOrderSink, txns: dict[int, int]) -> None:
    await eventually(lambda: txns.keys() <= sink.commit_ts(), within=45)


def check_exactly(sink: InOrderSink, txns: dict[int, int]) -> None:
    """The sink got exactly these transactions, in commit-ts order, whole."""
    assert [t.commit_ts for t in sink.txns] == sorted(txns)
    for t in sink.txns:
        assert t.start_ts == txns[t.commit_ts]
        assert [(r.table.qualified, dict(r.values)) for r in t.rows] == [
            ("merge.t", {"id": t.start_ts})
        ]


@asynccontextmanager
async def cluster_clients(
    kv: Kv, pump: RunningPump
) -> AsyncIterator[tuple[TsoClient, PumpsClient]]:
    cluster_id = pump.started.cluster_id
    assert await create_merge_table(kv) == VERSION
    async with TsoClient(kv, cluster_id) as tso, PumpsClient(kv, cluster_id) as client:
        yield tso, client


async def test_two_pumps_every_txn_once_in_commit_order(etcd: EtcdProcess, tmp_path: Path) -> None:
    sink = InOrderSink()
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint, **FAST_PUMP)) as p1,
        running_pump(pump_config(tmp_path / "p2", etcd.endpoint, **FAST_PUMP)) as p2,
        running_drainer(drainer_config(tmp_path / "d", etcd.endpoint), sink) as d,
        cluster_clients(kv, p1) as (tso, client),
    ):
        await eventually(lambda: len(client.pumps.available) == 2)
        txns: dict[int, int] = {}
        for _ in range(3):
            txns |= await write_txns(client, tso, 12)
        await delivered(sink, txns)
        check_exactly(sink, txns)

        status = await d.get("/status")
        assert status["PumpPos"].keys() == {p1.started.node_id, p2.started.node_id}
        assert min(status["PumpPos"].values()) >= d.started.start_ts
        assert status["TsMap"] == "" and status["Synced"] is False  # it just applied some
        # the checkpoint passes the last transaction and is what the drainer registers
        registry = NodeRegistry(kv)

        async def record() -> NodeStatus:
            found = await registry.get(NodeKind.DRAINER, d.started.node_id)
            assert found is not None
            return found

        async def caught_up() -> bool:
            return (await record()).max_commit_ts >= max(txns)

        await until(caught_up)
        mine = await record()
        assert mine.state is NodeState.ONLINE and mine.addr == d.started.advertise_addr
        commit_ts = await d.get("/commit_ts")
        assert commit_ts["message"] == "get drainer's latest ts success!"
        assert commit_ts["data"]["ts"] >= max(txns)


async def test_idle_pump_does_not_stall_and_a_joining_pump_is_merged_before_it_serves(
    etcd: EtcdProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = InOrderSink()
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint, **FAST_PUMP)) as p1,
        running_drainer(drainer_config(tmp_path / "d", etcd.endpoint), sink) as d,
        cluster_clients(kv, p1) as (tso, client),
    ):
        txns = await write_txns(client, tso, 10)
        await delivered(sink, txns)
        with caplog.at_level(logging.INFO, logger="services.drainer.api"):
            async with running_pump(pump_config(tmp_path / "p2", etcd.endpoint, **FAST_PUMP)) as p2:
                # Notify ran before the pump reported itself started: it is merged already.
                assert any("joining pump" in r.getMessage() for r in caplog.records)
                status = await d.get("/status")
                assert p2.started.node_id in status["PumpPos"]
                # p2 takes no transaction at all; its fake binlogs let the merge pass it
                idle = await write_direct(p1, tso, 10)
                await delivered(sink, idle)
                txns |= idle
                await eventually(lambda: len(client.pumps.available) == 2)
                both = await write_txns(client, tso, 20)
                await delivered(sink, both)
                txns |= both
        check_exactly(sink, txns)


async def etcd_revision(kv: Kv) -> int:
    return (await kv.txn((), ())).revision


async def test_pump_goes_offline_only_after_the_drainer_checkpoint_passed_it(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    sink = InOrderSink()
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint, **FAST_PUMP)) as p1,
        running_pump(pump_config(tmp_path / "p2", etcd.endpoint, **FAST_PUMP)) as p2,
        running_drainer(drainer_config(tmp_path / "d", etcd.endpoint), sink) as d,
        cluster_clients(kv, p1) as (tso, client),
    ):
        await eventually(lambda: len(client.pumps.available) == 2)
        txns = await write_txns(client, tso, 20)
        await delivered(sink, txns)
        since = await etcd_revision(kv)
        gone = p2.started.node_id
        async with (
            aiohttp.ClientSession() as http,
            http.put(f"{p2.http}/state/{gone}/close") as r,  # what binlogctl offline-pump does
        ):
            assert r.status == 200, await r.text()
        assert await asyncio.wait_for(p2.task, 45) is NodeState.OFFLINE

        # Replay the registry's history: when p2 became offline, the drainer's registered
        # checkpoint had passed everything p2 held when it began closing (later it only wrote
        # fake binlogs), and every transaction.
        drainer_key = f"{ROOT}/drainers/{d.started.node_id}".encode()
        pump_key = f"{ROOT}/pumps/{gone}".encode()
        drainer_ts, closing_ts = 0, None
        history = aclosing(kv.watch_prefix(ROOT.encode(), since))
        async with asyncio.timeout(10), history as events:
            async for event in events:
                if event.key not in (drainer_key, pump_key):
                    continue  # the DDL history lives under the same root
                status = NodeStatus.from_json(event.value)
                if event.key == drainer_key:
                    drainer_ts = status.max_commit_ts
                elif event.key == pump_key and status.state is NodeState.CLOSING:
                    closing_ts = closing_ts or status.max_commit_ts
                elif event.key == pump_key and status.state is NodeState.OFFLINE:
                    assert closing_ts is not None
                    assert drainer_ts >= max(closing_ts, *txns)
                    break

        # The drainer drops p2 from the merge and keeps going with p1 alone.
        async def removed() -> bool:
            return gone not in (await d.get("/status"))["PumpPos"]

        await until(removed)
        await eventually(lambda: len(client.pumps.available) == 1)
        after = await write_txns(client, tso, 10)
        await delivered(sink, after)
        check_exactly(sink, txns | after)


async def test_restart_resumes_from_the_checkpoint_without_loss_or_repeat(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    sink = InOrderSink()
    cfg = drainer_config(tmp_path / "d", etcd.endpoint)
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint, **FAST_PUMP)) as p1,
        running_pump(pump_config(tmp_path / "p2", etcd.endpoint, **FAST_PUMP)),
        cluster_clients(kv, p1) as (tso, client),
    ):
        await eventually(lambda: len(client.pumps.available) == 2)
        async with running_drainer(cfg, sink) as first:
            txns = await write_txns(client, tso, 15)
            await delivered(sink, txns)
        assert first.task.result() is NodeState.PAUSED
        store = FileCheckpoint(tmp_path / "d")
        saved = await store.load()
        assert saved is not None and saved >= max(txns) and store.consistent is True
        record = await NodeRegistry(kv).get(NodeKind.DRAINER, first.started.node_id)
        assert record is not None
        assert (record.state, record.max_commit_ts) == (NodeState.PAUSED, saved)

        while_down = await write_txns(client, tso, 15)
        txns |= while_down
        async with running_drainer(cfg, sink) as second:
            assert second.started.node_id == first.started.node_id
            assert second.started.start_ts == saved
            await delivered(sink, txns)
            more = await write_txns(client, tso, 5)
            await delivered(sink, more)
            txns |= more
        check_exactly(sink, txns)


async def test_a_restarted_pump_is_paused_then_pulled_at_its_new_address(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    sink = InOrderSink()
    p2_cfg = pump_config(tmp_path / "p2", etcd.endpoint, **FAST_PUMP)
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint, **FAST_PUMP)) as p1,
        running_drainer(drainer_config(tmp_path / "d", etcd.endpoint), sink) as d,
        cluster_clients(kv, p1) as (tso, client),
    ):
        async with running_pump(p2_cfg) as p2:
            await eventually(lambda: len(client.pumps.available) == 2)
            txns = await write_txns(client, tso, 20)
            await delivered(sink, txns)
            old_port = p2.started.grpc_port
        # p2 is paused now: writes go to p1, and the merge waits for p2 (it may still hold
        # commits below them), so none of these may come out before p2 is back
        await eventually(lambda: len(client.pumps.available) == 1)
        held = await write_txns(client, tso, 10)
        await asyncio.sleep(1.5)
        assert not held.keys() & sink.commit_ts()
        txns |= held
        async with running_pump(p2_cfg) as p2_again:  # same node, new port, back online
            assert p2_again.started.grpc_port != old_port
            await eventually(lambda: len(client.pumps.available) == 2)
            txns |= await write_txns(client, tso, 10)
            await delivered(sink, txns)
            status = await d.get("/status")
            assert status["PumpPos"].keys() == {p1.started.node_id, p2.started.node_id}
        check_exactly(sink, txns)
