"""Scripted pump peers: real grpclib servers on 127.0.0.1 standing in for pumps.

A ``ScriptedPump`` implements ``binlog.Pump/WriteBinlog`` and (unless created as a "Go pump")
``binlogext.PumpBatch/WriteBinlogs``. It records every binlog it receives and can be told to
answer an errmsg, fail with a gRPC status, or go silent.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from grpclib import GRPCError
from grpclib.const import Status
from grpclib.server import Server

from tributary.registry.status import NodeState, NodeStatus
from tributary.wire.binlog import PumpBase, WriteBinlogReq, WriteBinlogResp
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
