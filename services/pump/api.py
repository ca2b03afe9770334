"""gRPC edge of the pump: ``binlog.Pump`` (tipb wire), ``binlogext.PumpBatch`` and
``binlogext.PumpStats``.

Converts messages and maps errors; the logic lives in ``intake`` and storage.
Every RPC checks the cluster ID first, so a writer of another deployment
changes nothing. Refusals are raised as gRPC errors (a Go client looks at the
error before ``errmsg``) with the message also in ``errmsg`` where the reply
has one, and with the refusal's reason (``intake.Reason``'s value) as structured
detail: the trailing metadata key ``tributary-refusal`` of a unary refusal, the
``reasons`` field of a batch reply. Several reasons share UNAVAILABLE, and a
client tells "this pump cannot take prewrites now" from a transient failure by
that detail, never by message text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from services.pump.intake import Reason, WriteRefused
from services.pump.pullwire import (
    EMPTY_REPLY,
    EncodedReply,
    encode_pull_resp,
    frame_replies,
    send_block,
)
from services.pump.storage import PulledBinlog, StorageError
from tributary.wire.binlog import (
    PullBinlogReq,
    PumpBase,
    WriteBinlogReq,
    WriteBinlogResp,
)
from tributary.wire.binlogext import (
    BacklogReq,
    BacklogResp,
    PumpBatchBase,
    PumpStatsBase,
    WriteBinlogsReq,
    WriteBinlogsResp,
)
from tributary.wire.refusal import REFUSAL_KEY
from tributary.wire.views import WriteBinlogReqView

log = logging.getLogger(__name__)

_STATUS = {
    Reason.MALFORMED: Status.INVALID_ARGUMENT,
    Reason.TOO_LARGE: Status.RESOURCE_EXHAUSTED,
    Reason.NOT_ONLINE: Status.UNAVAILABLE,
    Reason.NOT_REGISTERED: Status.UNAVAILABLE,
    Reason.DISK_FULL: Status.UNAVAILABLE,
    Reason.STORAGE: Status.UNAVAILABLE,
}


class Refusal(GRPCError):
    """A refused write as a gRPC error; ``reason`` goes to the client as structured detail."""

    def __init__(self, status: Status, message: str, reason: Reason) -> None:
        super().__init__(status, message)
        self.reason = reason


class BinlogWrites(Protocol):
    """What the write RPCs need: ``Intake`` in one process, a front's link to the writer."""

    async def write(self, payload: bytes) -> None: ...

    async def write_many(self, payloads: Sequence[bytes]) -> list[WriteRefused | None]: ...


class BinlogSource(Protocol):
    def pull_batches(self, after_ts: int) -> AsyncIterator[list[PulledBinlog]]: ...


class BacklogSource(Protocol):
    async def backlog(self, after_ts: int) -> tuple[int, int]: ...


def check_cluster(expected: int, got: int) -> None:
    if got != expected:
        raise GRPCError(
            Status.FAILED_PRECONDITION,
            f"cluster ID mismatch: this pump belongs to cluster {expected}, request is for {got}",
        )


def _refusal(e: WriteRefused) -> Refusal:
    status = _STATUS[e.reason]
    if e.reason is Reason.STORAGE and not e.retriable:
        status = Status.INTERNAL
    return Refusal(status, str(e), e.reason)


class PumpApi(PumpBase):
    """``binlog.Pump``: WriteBinlog and PullBinlogs, byte-compatible with tipb."""

    def __init__(
        self,
        cluster_id: int,
        intake: BinlogWrites,
        source: BinlogSource,
        observe: Callable[[str, str, float], None] = lambda method, label, seconds: None,
    ) -> None:
        self._cluster_id = cluster_id
        self._intake = intake
        self._source = source
        self._observe = observe  # rpc_duration_seconds{method, label="succ"|"fail"}

    async def write_binlog(self, write_binlog_req: WriteBinlogReq) -> WriteBinlogResp:
        await self._write(write_binlog_req.cluster_id, write_binlog_req.payload)
        return WriteBinlogResp()

    async def _write(self, cluster_id: int, payload: bytes) -> None:
        began, label = time.monotonic(), "fail"
        try:
            check_cluster(self._cluster_id, cluster_id)
            await self._intake.write(payload)
            label = "succ"
        except WriteRefused as e:
            raise _refusal(e) from e
        finally:
            self._observe("WriteBinlog", label, time.monotonic() - began)

    def __mapping__(self) -> dict[str, Handler]:
        """WriteBinlog reads its request by hand and PullBinlogs sends its replies marshalled by
        hand, many to a write (``pullwire``); the server runs with ``PumpCodec``."""
        mapping = super().__mapping__()
        name = "/binlog.Pump/PullBinlogs"
        generated = mapping[name]
        mapping[name] = Handler(
            self._pull_stream, generated.cardinality, generated.request_type, generated.reply_type
        )
        mapping["/binlog.Pump/WriteBinlog"] = Handler(
            self._write_stream, Cardinality.UNARY_UNARY, WriteBinlogReqView, EncodedReply
        )
        return mapping

    async def _write_stream(self, stream: Stream[WriteBinlogReqView, EncodedReply]) -> None:
        request = await stream.recv_message()
        assert request is not None  # grpclib: a unary request always has its message
        try:
            await self._write(request.cluster_id, request.payload)
        except Refusal as e:
            await stream.send_trailing_metadata(
                status=e.status, status_message=e.message, metadata={REFUSAL_KEY: e.reason.value}
            )
            return
        await stream.send_message(EMPTY_REPLY)

    async def _pull_stream(self, stream: Stream[PullBinlogReq, Any]) -> None:
        request = await stream.recv_message()
        assert request is not None  # grpclib: a unary request always has its message
        check_cluster(self._cluster_id, request.cluster_id)
        after = request.start_from.offset if request.start_from else 0
        log.info("drainer pulls binlogs after commit ts %d", after)
        began, label = time.monotonic(), "fail"
        try:
            async for batch in self._source.pull_batches(after):
                replies = (encode_pull_resp(b.payload, b.start_ts, b.commit_ts) for b in batch)
                for block, count in frame_replies(replies):
                    await send_block(stream, block, count)
            label = "succ"
        finally:
            self._observe("PullBinlogs", label, time.monotonic() - began)


class PumpBatchApi(PumpBatchBase):
    """``binlogext.PumpBatch``: many binlogs in one RPC, one durable batch."""

    def __init__(self, cluster_id: int, intake: BinlogWrites) -> None:
        self._cluster_id = cluster_id
        self._intake = intake

    async def write_binlogs(self, write_binlogs_req: WriteBinlogsReq) -> WriteBinlogsResp:
        check_cluster(self._cluster_id, write_binlogs_req.cluster_id)
        results = await self._intake.write_many(write_binlogs_req.payloads)
        errors = [None if r is None else _refusal(r) for r in results]
        return WriteBinlogsResp(
            errmsgs=["" if e is None else str(e.message) for e in errors],
            codes=[0 if e is None else e.status.value for e in errors],
            reasons=["" if e is None else e.reason.value for e in errors],
        )


class PumpStatsApi(PumpStatsBase):
    """``binlogext.PumpStats``: what this pump holds, for a drainer's backlog measurement."""

    def __init__(self, cluster_id: int, source: BacklogSource) -> None:
        self._cluster_id = cluster_id
        self._source = source

    async def backlog(self, backlog_req: BacklogReq) -> BacklogResp:
        check_cluster(self._cluster_id, backlog_req.cluster_id)
        try:
            count, max_commit_ts = await self._source.backlog(backlog_req.after_ts)
        except StorageError as e:
            status = Status.UNAVAILABLE if e.retriable else Status.INTERNAL
            raise GRPCError(status, f"cannot count the backlog: {e}") from e
        return BacklogResp(count=count, max_commit_ts=max_commit_ts)
