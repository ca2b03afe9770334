"""The lean PullBinlogs client against a real grpclib pump service on 127.0.0.1, and the puller
on top of it: messages whole and in order across frames and flow-control windows, the end of
the call, errors, reconnection from the last commit ts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import grpclib
import pytest
from grpclib.const import Status
from grpclib.server import Server

from services.drainer.feed import Inbox
from services.drainer.puller import PULL_PATH, Puller
from services.drainer.pullstream import PullStreamError, pull_messages
from tributary.wire.binlog import (
    Binlog,
    BinlogType,
    Entity,
    Pos,
    PullBinlogReq,
    PullBinlogResp,
    PumpBase,
)


def resp(payload: bytes) -> PullBinlogResp:
    return PullBinlogResp(entity=Entity(payload=payload))


class FakePump(PumpBase):
    """Streams ``payloads`` (after an optional error) and records the requests."""

    def __init__(self, payloads: Sequence[bytes], error: Status | None = None) -> None:
        self.payloads = list(payloads)
        self.error = error
        self.requests: list[PullBinlogReq] = []
        self.called_twice = asyncio.Event()
        self.hold = asyncio.Event()  # set: end the call after the payloads; else keep it open
        self.hold.set()

    async def pull_binlogs(self, pull_binlog_req: PullBinlogReq) -> AsyncIterator[PullBinlogResp]:
        self.requests.append(pull_binlog_req)
        if len(self.requests) >= 2:
            self.called_twice.set()
        for p in self.payloads:
            yield resp(p)
        if self.error is not None:
            raise grpclib.GRPCError(self.error, "no such thing")
        await self.hold.wait()


async def serve(pump: FakePump) -> tuple[Server, int]:
    server = Server([pump])
    await server.start("127.0.0.1", 0)
    sockets = server._server.sockets  # type: ignore[union-attr]
    return server, int(sockets[0].getsockname()[1])


async def stop(server: Server) -> None:
    server.close()
    await server.wait_closed()


async def collect(port: int, window: int = 1 << 20) -> list[bytes]:
    request = bytes(PullBinlogReq(cluster_id=7, start_from=Pos(offset=11)))
    messages = pull_messages("127.0.0.1", port, PULL_PATH, request, window=window)
    return [m async for m in messages]


async def test_messages_arrive_whole_in_order_past_frames_and_windows() -> None:
    # 40 KiB messages span several 16 KiB frames; 3 MiB in all is many 64 KiB windows.
    payloads = [bytes([i % 251]) * (40_000 if i % 7 == 0 else 900 + i) for i in range(500)]
    pump = FakePump(payloads)
    server, port = await serve(pump)
    try:
        got = await collect(port, window=65_535)
    finally:
        await stop(server)
    assert got == [bytes(resp(p)) for p in payloads]
    assert pump.requests == [PullBinlogReq(cluster_id=7, start_from=Pos(offset=11))]


async def test_a_message_bigger_than_the_window_completes() -> None:
    payloads = [b"s", b"L" * 300_000, b"t", b"M" * 70_000]
    server, port = await serve(FakePump(payloads))
    try:
        got = await collect(port, window=65_535)
    finally:
        await stop(server)
    assert got == [bytes(resp(p)) for p in payloads]


async def test_a_slow_consumer_still_gets_everything() -> None:
    payloads = [bytes([i]) * 3000 for i in range(200)]
    server, port = await serve(FakePump(payloads))
    got: list[bytes] = []
    try:
        request = bytes(PullBinlogReq(cluster_id=1))
        async for m in pull_messages("127.0.0.1", port, PULL_PATH, request, window=20_000):
            got.append(m)
            if len(got) % 50 == 0:
                await asyncio.sleep(0.05)  # the pump is held back by the window meanwhile
    finally:
        await stop(server)
    assert got == [bytes(resp(p)) for p in payloads]


async def test_an_error_status_ends_the_stream_after_what_came_before() -> None:
    server, port = await serve(FakePump([b"a", b"b"], error=Status.NOT_FOUND))
    got: list[bytes] = []
    try:
        with pytest.raises(PullStreamError, match="grpc status 5: no such thing"):
            request = bytes(PullBinlogReq(cluster_id=1))
            async for m in pull_messages("127.0.0.1", port, PULL_PATH, request):
                got.append(m)
    finally:
        await stop(server)
    assert got == [bytes(resp(b"a")), bytes(resp(b"b"))]


async def test_an_unknown_method_is_an_error() -> None:
    server, port = await serve(FakePump([]))
    try:
        with pytest.raises(PullStreamError, match="grpc status 12"):
            [m async for m in pull_messages("127.0.0.1", port, "/binlog.Pump/Nope", b"")]
    finally:
        await stop(server)


async def test_no_server_is_an_error() -> None:
    server, port = await serve(FakePump([]))
    await stop(server)
    with pytest.raises(PullStreamError, match="cannot connect"):
        await collect(port)


def binlog(commit_ts: int) -> bytes:
    return bytes(
        Binlog(tp=BinlogType(BinlogType.Commit), start_ts=commit_ts - 1, commit_ts=commit_ts)
    )


async def test_the_puller_resumes_after_its_last_commit_ts() -> None:
    # The first call ends abnormally after two binlogs: the next asks for what follows them.
    pump = FakePump([binlog(20), binlog(30)], error=Status.UNAVAILABLE)
    server, port = await serve(pump)
    inbox = Inbox(asyncio.Event(), size=100)
    puller = Puller("pump-1", f"127.0.0.1:{port}", 9, 10, inbox, retry_interval=0.01)
    task = asyncio.create_task(puller.run(), name="test-puller")
    try:
        async with asyncio.timeout(30):
            await pump.called_twice.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await stop(server)
    assert [r.start_from.offset for r in pump.requests[:2]] == [10, 30]
    assert all(r.cluster_id == 9 for r in pump.requests)
    taken = [inbox.take() for _ in range(inbox.qsize())]
    assert [i.commit_ts for i in taken if i is not None][:2] == [20, 30]
    assert puller.last_ts == 30
