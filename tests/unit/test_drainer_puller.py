"""The puller against a real grpclib pump service on 127.0.0.1: binlogs whole and in order
across frames and flow-control windows and past a slow consumer, reconnection from the last
commit ts after an error status, retries while a pump is down, no stream while paused, and a
response that is not a binlog stopping the puller. (Real pumps restarting: the integration
tests in test_drainer_pumps.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpclib
import pytest
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.server import Server

from services.drainer.errors import MalformedPayload
from services.drainer.feed import Inbox
from services.drainer.item import PulledBinlogItem
from services.drainer.pullchannel import Deframer
from services.drainer.puller import Puller
from tests.support.k8s import eventually_async
from tributary.wire.binlog import (
    Binlog,
    BinlogType,
    Entity,
    Pos,
    PullBinlogReq,
    PullBinlogResp,
    PumpBase,
)


def binlog(commit_ts: int, size: int = 0) -> bytes:
    return bytes(
        Binlog(
            tp=BinlogType(BinlogType.Commit),
            start_ts=commit_ts - 1,
            commit_ts=commit_ts,
            prewrite_value=bytes([commit_ts % 251]) * size,
        )
    )


class Raw:
    """A reply the server's codec sends as it is."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class PassThroughCodec(ProtoCodec):
    def encode(self, message: Any, message_type: Any) -> bytes:
        if isinstance(message, Raw):
            return message.data
        return super().encode(message, message_type)


class FakePump(PumpBase):
    """Streams the ``payloads`` after the requested commit ts, then ends the call with
    ``error`` or OK, or (``endless``) keeps it open streaming what is put into ``more``;
    records the requests and the calls cancelled by the drainer."""

    def __init__(
        self, payloads: Sequence[bytes | Raw], error: Status | None = None, *, endless: bool = False
    ) -> None:
        self.payloads = list(payloads)
        self.error = error
        self.endless = endless
        self.more: asyncio.Queue[bytes] = asyncio.Queue()
        self.requests: list[PullBinlogReq] = []
        self.calls = asyncio.Condition()
        self.cancelled = asyncio.Event()

    async def pull_binlogs(self, pull_binlog_req: PullBinlogReq) -> AsyncIterator[Any]:
        async with self.calls:
            self.requests.append(pull_binlog_req)
            self.calls.notify_all()
        try:
            for p in self.payloads:
                if isinstance(p, Raw):
                    yield p  # already marshalled: the test codec passes it through
                elif binlog_ts(p) > pull_binlog_req.start_from.offset:
                    yield PullBinlogResp(entity=Entity(payload=p))
            if self.error is not None:
                raise grpclib.GRPCError(self.error, "no such thing")
            while self.endless:
                p = await self.more.get()
                self.payloads.append(p)  # a later call streams it too
                yield PullBinlogResp(entity=Entity(payload=p))
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def wait_calls(self, n: int) -> None:
        async with asyncio.timeout(30):
            async with self.calls:
                await self.calls.wait_for(lambda: len(self.requests) >= n)


def binlog_ts(payload: bytes) -> int:
    return Binlog().parse(payload).commit_ts


async def serve(pump: FakePump, port: int = 0) -> tuple[Server, int]:
    server = Server([pump], codec=PassThroughCodec())
    await server.start("127.0.0.1", port)
    sockets = server._server.sockets  # type: ignore[union-attr]
    return server, int(sockets[0].getsockname()[1])


async def stop(server: Server) -> None:
    server.close()
    await server.wait_closed()


async def take(inbox: Inbox, n: int, pause: float = 0.0) -> list[PulledBinlogItem]:
    """The first ``n`` items, waiting ``pause`` after every 50 (a slow consumer)."""
    got: list[PulledBinlogItem] = []
    async with asyncio.timeout(30):
        while len(got) < n:
            item = inbox.take()
            if item is None:
                await asyncio.sleep(0.005)
                continue
            got.append(item)
            if pause and len(got) % 50 == 0:
                await asyncio.sleep(pause)
    return got


async def pulling(puller: Puller) -> asyncio.Task[Any]:
    return asyncio.create_task(puller.run(), name=f"test-puller-{puller.node_id}")


async def cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_binlogs_arrive_whole_in_order_past_frames_windows_and_a_slow_consumer() -> None:
    # 40 KiB and 300 KiB binlogs span many 16 KiB frames; 10 MiB in all crosses the windows.
    payloads = [binlog(10 + i, 40_000 if i % 7 == 0 else 300 + i) for i in range(220)]
    payloads.append(binlog(1000, 300_000))
    pump = FakePump(payloads, endless=True)
    server, port = await serve(pump)
    inbox = Inbox(asyncio.Event(), size=8)
    puller = Puller("pump-1", f"127.0.0.1:{port}", 7, 9, inbox)
    task = await pulling(puller)
    try:
        got = await take(inbox, len(payloads), pause=0.05)
    finally:
        await cancel(task)
        await stop(server)
    assert [i.payload for i in got] == payloads
    assert [(i.commit_ts, i.start_ts) for i in got[:2]] == [(10, 9), (11, 10)]
    assert pump.requests == [PullBinlogReq(cluster_id=7, start_from=Pos(offset=9))]
    assert puller.last_ts == 1000 and puller.received == len(payloads)


async def test_the_puller_resumes_after_its_last_commit_ts_after_an_error_status() -> None:
    # The first call ends abnormally after two binlogs: the next asks for what follows them.
    pump = FakePump([binlog(20), binlog(30)], error=Status.UNAVAILABLE)
    server, port = await serve(pump)
    inbox = Inbox(asyncio.Event(), size=100)
    puller = Puller("pump-1", f"127.0.0.1:{port}", 9, 10, inbox, retry_interval=0.01)
    task = await pulling(puller)
    try:
        await pump.wait_calls(2)
    finally:
        await cancel(task)
        await stop(server)
    assert [r.start_from.offset for r in pump.requests[:2]] == [10, 30]
    assert all(r.cluster_id == 9 for r in pump.requests)
    assert [i.commit_ts for i in await take(inbox, 2)] == [20, 30]
    assert puller.last_ts == 30 and puller.reconnects >= 1


async def test_a_pump_that_is_down_is_retried_until_it_is_back() -> None:
    pump = FakePump([binlog(20), binlog(30)], endless=True)
    server, port = await serve(pump)
    await stop(server)  # a pump restarting: its port refuses connections for a while
    inbox = Inbox(asyncio.Event(), size=100)
    puller = Puller("pump-1", f"127.0.0.1:{port}", 9, 10, inbox, retry_interval=0.02)
    task = await pulling(puller)
    try:
        await eventually_async(lambda: puller.reconnects >= 2, "refused pulls retried", 30, 0.02)
        server, _ = await serve(pump, port)
        assert [i.commit_ts for i in await take(inbox, 2)] == [20, 30]
    finally:
        await cancel(task)
        await stop(server)
    assert [r.start_from.offset for r in pump.requests] == [10]


async def test_a_paused_puller_holds_no_stream_and_resumes_from_its_last_commit_ts() -> None:
    pump = FakePump([binlog(20), binlog(30)], endless=True)
    server, port = await serve(pump)
    inbox = Inbox(asyncio.Event(), size=100)
    puller = Puller("pump-1", f"127.0.0.1:{port}", 9, 10, inbox, retry_interval=0.01)
    task = await pulling(puller)
    try:
        got = await take(inbox, 2)
        puller.pause()
        pump.more.put_nowait(binlog(40))  # the puller notices the pause after an item
        async with asyncio.timeout(30):
            await pump.cancelled.wait()  # leaving the call reset the stream at the pump
        assert puller.paused and len(pump.requests) == 1
        puller.resume()
        await pump.wait_calls(2)
        pump.more.put_nowait(binlog(50))
        got += await take(inbox, 2)
    finally:
        await cancel(task)
        await stop(server)
    assert [r.start_from.offset for r in pump.requests] == [10, 40]
    assert [i.commit_ts for i in got] == [20, 30, 40, 50]


@pytest.mark.parametrize(
    "reply",
    [
        Raw(b"\x0a\x05\x12\x03\xff\xff\xff"),  # a PullBinlogResp whose payload is no binlog
        Raw(b"\x0a\x7f\x12"),  # not a PullBinlogResp at all: its entity runs past the end
    ],
)
async def test_a_response_that_is_not_a_binlog_stops_the_puller(reply: Raw) -> None:
    pump = FakePump([binlog(20), reply, binlog(30)])
    server, port = await serve(pump)
    inbox = Inbox(asyncio.Event(), size=100)
    puller = Puller("pump-1", f"127.0.0.1:{port}", 9, 10, inbox, retry_interval=0.01)
    try:
        with pytest.raises(MalformedPayload):
            async with asyncio.timeout(30):
                await puller.run()
    finally:
        await stop(server)
    assert puller.last_ts == 20 and len(pump.requests) == 1


def test_the_deframer_cuts_whole_messages_across_chunks() -> None:
    framed = [b"\x00" + len(m).to_bytes(4, "big") + m for m in (b"abc", b"defghi", b"", b"j")]
    stream = b"".join(framed)
    for cut in range(len(stream) + 1):  # every split of the bytes into two chunks
        deframer = Deframer()
        got = deframer.feed([stream[:cut]]) + deframer.feed([stream[cut:]])
        assert got == [b"abc", b"defghi", b"", b"j"] and deframer.empty
    deframer = Deframer()
    assert deframer.feed([stream[:10], stream[10:15]]) == [b"abc"]  # the worked example
    assert deframer.feed([stream[15:17]]) == [] and not deframer.empty
    assert deframer.feed([stream[17:19]]) == [b"defghi"]
    with pytest.raises(grpclib.exceptions.ProtocolError):
        Deframer().feed([b"\x01\x00\x00\x00\x01x"])  # compressed: never sent by a pump
