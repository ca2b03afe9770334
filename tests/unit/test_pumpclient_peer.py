"""Scripted pump peers for the pump client tests, and the tests of the client's
hand-written wire encoders against them and against the generated classes.

A ``ScriptedPump`` is a real grpclib server on 127.0.0.1 implementing
``binlog.Pump/WriteBinlog`` and (unless created as a "Go pump")
``binlogext.PumpBatch/WriteBinlogs``. It records every binlog it receives and
can be told to answer an errmsg, fail with a gRPC status, or go silent.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from grpclib import GRPCError
from grpclib.const import Status
from grpclib.server import Server

from tributary.pumpclient.codec import (
    DecodeError,
    decode_reply,
    encode_binlog,
    encode_write_binlog_req,
    encode_write_binlogs_req,
)
from tributary.pumpclient.stats import ClientStats
from tributary.pumpclient.transport import BatchRejected, PumpTransport
from tributary.registry.status import NodeState, NodeStatus
from tributary.varint import varint
from tributary.wire.binlog import Binlog, BinlogType, PumpBase, WriteBinlogReq, WriteBinlogResp
from tributary.wire.binlogext import PumpBatchBase, WriteBinlogsReq, WriteBinlogsResp
from tributary.wire.peek import BinlogHeader, peek


@dataclass(frozen=True)
class Received:
    method: str  # "unary" or "batch"
    cluster_id: int
    payload: bytes

    @property
    def header(self) -> BinlogHeader:
        return peek(self.payload)


# A verdict for one payload: None = store it; a str = answer that errmsg; a
# (str, Status) pair = refuse with that code (a GRPCError on the unary path,
# a per-payload code in the batch reply), as our pump does.
Verdict = Callable[[bytes], str | tuple[str, Status] | None]


class ScriptedPump:
    """Behaviour knobs (all may be changed while running):

    - ``status``: every call fails with this gRPC status (probes too);
    - ``errmsg``: every call answers this errmsg (probes too);
    - ``verdict``: per-payload errmsg (batch items individually);
    - ``silent``: calls never answer (until the server stops);
    - ``gate``: when set, calls wait until the event is set;
    - ``fail_next``: the next N calls fail with ``fail_status``.
    """

    def __init__(self, node_id: str, *, batch: bool = True, go_style: bool = False) -> None:
        self.node_id = node_id
        self.batch = batch
        # Without the batch service, answer WriteBinlogs as a Go server does
        # (UNIMPLEMENTED with a gRPC content type) rather than as grpclib does.
        self.go_style = go_style
        self.received: list[Received] = []
        self.unary_calls = 0
        self.batch_calls = 0
        self.batch_sizes: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.status: Status | None = None
        self.errmsg = ""
        self.verdict: Verdict | None = None
        self.silent = False
        self.gate: asyncio.Event | None = None
        self.fail_next = 0
        self.fail_status = Status.UNAVAILABLE
        self.port = 0
        self._server: Server | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def record(self, state: NodeState = NodeState.ONLINE) -> NodeStatus:
        return NodeStatus(node_id=self.node_id, addr=self.addr, state=state)

    def binlogs(self) -> list[BinlogHeader]:
        """Headers of the non-probe binlogs received, in arrival order."""
        return [r.header for r in self.received if r.payload]

    def probes(self) -> list[Received]:
        return [r for r in self.received if not r.payload]

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> int:
        handlers: list[Any] = [_Unary(self)]
        if self.batch:
            handlers.append(_Batch(self))
        elif self.go_style:
            handlers.append(PumpBatchBase())  # every method raises UNIMPLEMENTED
        self._server = Server(handlers)
        await self._server.start("127.0.0.1", self.port or 0, ssl=ssl_context)
        sockets = self._server._server.sockets  # type: ignore[union-attr]
        self.port = int(sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _enter(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.silent:
                await asyncio.Event().wait()  # until the server cancels us
            if self.fail_next > 0:
                self.fail_next -= 1
                raise GRPCError(self.fail_status, "scripted failure")
            if self.status is not None:
                raise GRPCError(self.status, "scripted status")
        finally:
            self.in_flight -= 1

    def _answer(self, method: str, cluster_id: int, payload: bytes) -> tuple[str, int]:
        if self.errmsg:
            return self.errmsg, 0
        if self.verdict is not None and payload:
            verdict = self.verdict(payload)
            if isinstance(verdict, tuple):
                return verdict[0], verdict[1].value
            if verdict is not None:
                return verdict, 0
        self.received.append(Received(method, cluster_id, payload))
        return "", 0


class _Unary(PumpBase):
    def __init__(self, peer: ScriptedPump) -> None:
        self.peer = peer

    async def write_binlog(self, write_binlog_req: WriteBinlogReq) -> WriteBinlogResp:
        self.peer.unary_calls += 1
        await self.peer._enter()
        req = write_binlog_req
        errmsg, code = self.peer._answer("unary", req.cluster_id, req.payload)
        if code:
            raise GRPCError(Status(code), errmsg)
        return WriteBinlogResp(errmsg=errmsg)


class _Batch(PumpBatchBase):
    def __init__(self, peer: ScriptedPump) -> None:
        self.peer = peer

    async def write_binlogs(self, write_binlogs_req: WriteBinlogsReq) -> WriteBinlogsResp:
        self.peer.batch_calls += 1
        self.peer.batch_sizes.append(len(write_binlogs_req.payloads))
        await self.peer._enter()
        req = write_binlogs_req
        answers = [self.peer._answer("batch", req.cluster_id, p) for p in req.payloads]
        codes = [code for _, code in answers] if any(code for _, code in answers) else []
        return WriteBinlogsResp(errmsgs=[m for m, _ in answers], codes=codes)


@asynccontextmanager
async def running_pumps(*peers: ScriptedPump) -> AsyncIterator[tuple[ScriptedPump, ...]]:
    for peer in peers:
        await peer.start()
    try:
        yield peers
    finally:
        for peer in peers:
            peer.silent = False
            if peer.gate is not None:
                peer.gate.set()
            await peer.stop()


async def eventually(predicate: Callable[[], bool], within: float = 20.0) -> None:
    """Wait until ``predicate()`` holds, failing after ``within`` seconds. Polls:
    the conditions are plain attributes of the code under test."""
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


# -- tests of the encoders -------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"tp": 0, "start_ts": 5, "prewrite_key": b"k", "prewrite_value": b"v" * 300},
        {"tp": 1, "start_ts": 449_000_000_000_000_001, "commit_ts": 449_000_000_000_000_009},
        {"tp": 2, "start_ts": 7},
        {"tp": 0, "start_ts": 9, "ddl_query": b"create table t (a int)", "ddl_job_id": 42},
        {"tp": 0, "start_ts": 1, "ddl_schema_state": 2},
    ],
)
def test_encode_binlog_matches_generated_message(fields: dict[str, object]) -> None:
    tp = int(fields.pop("tp"))  # type: ignore[call-overload]
    start_ts = int(fields.pop("start_ts"))  # type: ignore[call-overload]
    payload = encode_binlog(tp, start_ts, **fields)  # type: ignore[arg-type]
    parsed = Binlog().parse(payload)
    expected = Binlog(tp=BinlogType(tp), start_ts=start_ts, **fields)  # type: ignore[arg-type]
    assert parsed.to_dict() == expected.to_dict()
    header = peek(payload)
    assert (header.tp, header.start_ts) == (tp, start_ts)
    assert header.commit_ts == fields.get("commit_ts", 0)


def test_encode_requests_match_generated_messages() -> None:
    payload = encode_binlog(0, 3, prewrite_value=b"x" * 200)
    req = WriteBinlogReq().parse(encode_write_binlog_req(2**63 + 5, payload))
    assert (req.cluster_id, req.payload) == (2**63 + 5, payload)
    assert encode_write_binlog_req(0, b"") == b""  # the probe: all defaults
    probe = WriteBinlogReq().parse(encode_write_binlog_req(7, b""))
    assert (probe.cluster_id, probe.payload) == (7, b"")
    batch = WriteBinlogsReq().parse(encode_write_binlogs_req(7, [payload, b"", b"z"]))
    assert batch.cluster_id == 7
    assert batch.payloads == [payload, b"", b"z"]


def test_decode_reply_reads_generated_responses() -> None:
    batch = bytes(WriteBinlogsResp(errmsgs=["", "disk full", ""], codes=[0, 14, 0]))
    assert decode_reply(batch) == (["", "disk full", ""], [0, 14, 0])
    unary = bytes(WriteBinlogResp(errmsg="no online: paused"))
    assert decode_reply(unary) == (["no online: paused"], [])
    assert decode_reply(bytes(WriteBinlogResp())) == ([], [])  # success: field omitted
    # codes unpacked (one varint per entry) read the same as packed
    assert decode_reply(b"\x0a\x00\x10\x00\x0a\x01x\x10\x08") == (["", "x"], [0, 8])
    # unknown fields are skipped
    assert decode_reply(b"\x18\x05\x25\x00\x00\x00\x00" + unary)[0] == ["no online: paused"]
    for bad in (b"\x0a\x05ab", b"\x0a", b"\x0b", b"\x12\x02\x80", b"\x25\x00"):
        with pytest.raises(DecodeError):
            decode_reply(bad)


def test_varint_negative_is_ten_bytes_twos_complement() -> None:
    assert varint(-1) == b"\xff" * 9 + b"\x01"
    assert varint(300) == b"\xac\x02"


async def test_transport_talks_to_a_real_server() -> None:
    """The raw-bytes requests pass through grpclib's codec and decode server side."""
    async with running_pumps(ScriptedPump("a"), ScriptedPump("go", batch=False)) as (a, go):
        stats = ClientStats()
        t = PumpTransport(a.addr, 99, stats, rpc_timeout=5)
        payload = encode_binlog(0, 11, prewrite_value=b"v")
        await t.write_one(payload)
        assert await t.write_many([payload, payload]) == [None, None]
        assert [(r.method, r.cluster_id, r.payload) for r in a.received] == [
            ("unary", 99, payload),
            ("batch", 99, payload),
            ("batch", 99, payload),
        ]
        t.close()
        g = PumpTransport(go.addr, 99, stats, rpc_timeout=5)
        with pytest.raises(BatchRejected):
            await g.write_many([payload])
        assert not g.batch_supported
        g.close()
        assert (stats.unary_rpcs, stats.batch_rpcs, stats.batched_binlogs) == (1, 2, 3)
