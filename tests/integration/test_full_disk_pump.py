"""A pump whose data dir is on a real, small filesystem that fills up.

Below ``stop-write-at-available-space`` the pump refuses prewrites (a clear, retriable error)
and still stores the commits of the prewrites it took; on a disk with no byte left even a
commit is refused, with the disk named as the cause, and nothing half-written stays behind; once
space returns the pump takes writes again, and a puller gets every acknowledged commit.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.smalldisk import SmallDisk, small_disk
from tests.support.stubs import commit, prewrite, pull, pump_stub, write
from tributary.config.pump import StorageConfig
from tributary.wire import ts
from tributary.wire.binlog import PumpStub

MiB = 1 << 20
VALUE = b"v" * (64 * 1024)
SPACE_CHECK = 10.0  # seconds; the pump looks at the free space every 3 s


async def refused_write(stub: PumpStub, cid: int, payload: bytes) -> GRPCError:
    """Write ``payload`` until the pump refuses it (its free-space view is cached a while)."""
    deadline = time.monotonic() + SPACE_CHECK
    while True:
        try:
            await write(stub, cid, payload)
        except GRPCError as e:
            return e
        if time.monotonic() > deadline:
            pytest.fail("the pump kept taking prewrites on a disk below its threshold")
        await asyncio.sleep(0.2)


async def accepted_write(stub: PumpStub, cid: int, payload: bytes) -> None:
    """Write ``payload`` until the pump takes it (it sees the freed space within 3 s)."""
    deadline = time.monotonic() + SPACE_CHECK
    while True:
        try:
            await write(stub, cid, payload)
            return
        except GRPCError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def commits_until_refused(
    stub: PumpStub, cid: int, txns: list[tuple[int, int]]
) -> tuple[list[tuple[int, int]], GRPCError]:
    """Commit ``txns`` one by one on a full disk: (the ones acknowledged, the first refusal)."""
    for i, (start, end) in enumerate(txns):
        try:
            await write(stub, cid, commit(start, end))
        except GRPCError as e:
            return txns[:i], e
    pytest.fail(f"{len(txns)} commits all stored on a disk with no byte left")


async def test_pump_on_a_full_disk_refuses_prewrites_keeps_commits_and_loses_nothing(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    with small_disk(tmp_path / "disk", 64 * MiB) as disk:
        await _run(disk, etcd)


async def _run(disk: SmallDisk, etcd: EtcdProcess) -> None:
    storage = StorageConfig(stop_write_at_available_space=16 * MiB)
    cfg = pump_config(disk.root / "pump", etcd.endpoint, storage=storage)
    async with running_pump(cfg) as p, pump_stub(p.addr) as stub:
        cid = p.started.cluster_id
        base = ts.from_seconds(time.time())
        txns = [(base + 10 * i, base + 10 * i + 5) for i in range(1, 401)]
        for start, _ in txns:
            await write(stub, cid, prewrite(start, VALUE[:1024]))
        acked = txns[:2]
        for start, end in acked:
            await write(stub, cid, commit(start, end))

        # Below the threshold: prewrites refused with a clear error, commits still stored.
        disk.fill_to(8 * MiB)
        refused = await refused_write(stub, cid, prewrite(base + 9_000, VALUE))
        assert refused.status is Status.UNAVAILABLE
        assert "stop-write-at-available-space" in str(refused.message)
        for start, end in txns[2:4]:
            await write(stub, cid, commit(start, end))
        acked += txns[2:4]

        # Not a byte left: commits go until the disk refuses one; the error says why.
        disk.fill_to(0)
        stored, refused = await commits_until_refused(stub, cid, txns[4:])
        acked += stored
        assert refused.status is Status.UNAVAILABLE, refused
        assert "No space left on device" in str(refused.message), refused.message
        assert "disk" in str(refused.message).lower()

        # Space returns: the refused commit, the other commits and new prewrites are taken.
        disk.release()
        late = (base + 9_000, base + 9_005)
        await accepted_write(stub, cid, prewrite(late[0], VALUE))
        rest = txns[len(acked) :]
        for start, end in rest:
            await write(stub, cid, commit(start, end))
        await write(stub, cid, commit(*late))
        acked += [*rest, late]

        got = await pull(stub, cid, 0, len(acked))
        assert [(b.start_ts, b.commit_ts) for b in got] == sorted(acked, key=lambda t: t[1])
