"""A pump whose disk is "full" refuses prewrites only; drainers near the GC point are flagged."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from services.pump.lifecycle import detect_purged_drainers
from services.pump.storage import Storage, StorageSettings, WriteItem
from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.stubs import commit, prewrite, pump_stub, write
from tributary.config.pump import StorageConfig
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.wire import ts
from tributary.wire.peek import peek


async def test_full_disk_refuses_prewrites_but_takes_commits(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    full = StorageConfig(stop_write_at_available_space=1 << 60)  # more than any disk has
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint, storage=full)) as p:
        cid = p.started.cluster_id
        async with pump_stub(p.addr) as stub:
            with pytest.raises(GRPCError) as refused:
                await write(stub, cid, prewrite(100, b"v"))
            assert refused.value.status is Status.UNAVAILABLE
            assert "stop-write-at-available-space" in str(refused.value.message)
            # A commit (of a prewrite written before the disk filled) is still stored.
            await write(stub, cid, commit(90, 95))


async def test_drainers_behind_or_near_the_gc_point_are_flagged(tmp_path: Path) -> None:
    now = time.time()
    # No free-space floor: the default (10 GiB) would make the test depend on the host's disk.
    async with Storage.open(
        tmp_path / "s", StorageSettings(stop_write_at_available_space=0)
    ) as storage:
        start, end = ts.from_seconds(now - 1), ts.from_seconds(now)
        for payload in (prewrite(start, b"v"), commit(start, end)):
            await storage.write([WriteItem(payload, peek(payload))])
        gc_ts = ts.from_seconds(now - 10 * 86400)
        await storage.gc(gc_ts)
        assert storage.gc_ts == gc_ts

        registry = NodeRegistry(MemoryKv())
        near = ts.from_seconds(now - 10 * 86400 + 3600)  # 1 h past the GC point: within 20 h
        far = ts.from_seconds(now - 86400)
        for node, checkpoint, state in (
            ("behind", gc_ts - 1, NodeState.ONLINE),
            ("near", near, NodeState.PAUSED),
            ("fine", far, NodeState.ONLINE),
            ("gone", 0, NodeState.OFFLINE),
        ):
            await registry.update(
                NodeKind.DRAINER, NodeStatus(node, "127.0.0.1:1", state, max_commit_ts=checkpoint)
            )
        alerts: list[str] = []
        flagged = await detect_purged_drainers(registry, storage, alerts.append)
    assert sorted(flagged) == sorted(alerts) == ["behind", "near"]
