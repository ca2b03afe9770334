"""Small helpers around the generated gRPC stubs for talking to real pumps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from grpclib.client import Channel

from tributary.wire.binlog import (
    Binlog,
    BinlogType,
    Pos,
    PullBinlogReq,
    PumpStub,
    WriteBinlogReq,
)


def prewrite(start_ts: int, value: bytes = b"", key: bytes = b"k") -> bytes:
    return bytes(
        Binlog(tp=BinlogType.Prewrite, start_ts=start_ts, prewrite_key=key, prewrite_value=value)
    )


def commit(start_ts: int, commit_ts: int) -> bytes:
    return bytes(Binlog(tp=BinlogType.Commit, start_ts=start_ts, commit_ts=commit_ts))


def rollback(start_ts: int) -> bytes:
    return bytes(Binlog(tp=BinlogType.Rollback, start_ts=start_ts))


@asynccontextmanager
async def pump_stub(addr: str) -> AsyncIterator[PumpStub]:
    host, _, port = addr.rpartition(":")
    channel = Channel(host, int(port))
    try:
        yield PumpStub(channel)
    finally:
        channel.close()


async def write(stub: PumpStub, cluster_id: int, payload: bytes) -> None:
    await stub.write_binlog(WriteBinlogReq(cluster_id=cluster_id, payload=payload), timeout=30)


async def pull(
    stub: PumpStub, cluster_id: int, after: int, count: int, *, skip_fake: bool = True
) -> list[Binlog]:
    """The next ``count`` binlogs after commit ts ``after`` (fake ones skipped if asked)."""
    out: list[Binlog] = []
    req = PullBinlogReq(cluster_id=cluster_id, start_from=Pos(offset=after))
    async for resp in stub.pull_binlogs(req, timeout=60):
        b = Binlog().parse(resp.entity.payload)
        if skip_fake and b.tp == BinlogType.Rollback and b.start_ts == b.commit_ts:
            continue
        out.append(b)
        if len(out) >= count:
            break
    return out
