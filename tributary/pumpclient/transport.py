"""The gRPC edge of the client: one grpclib channel per pump address, the two
write RPCs, and the mapping of every transport failure to :class:`RpcFailure`.

Invariant: failures are classified by gRPC status code, the pump's refusal
reason (structured detail, :mod:`tributary.wire.refusal`) or exception type,
never by message text; a failure that may have reached the pump's storage
(deadline, lost connection, server-side UNAVAILABLE/INTERNAL without a reason
that says the pump refused before storing...) is marked ``uncertain``.
Requests are marshalled by :mod:`pumpclient.codec` and handed to grpclib as
opaque bytes.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Sequence
from typing import Any

from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError

from tributary.net import AddressError, split_endpoint
from tributary.pumpclient.codec import (
    DecodeError,
    decode_reply,
    encode_write_binlog_req,
    encode_write_binlogs_req,
)
from tributary.pumpclient.errors import RpcFailure
from tributary.pumpclient.stats import ClientStats
from tributary.wire.refusal import PREWRITE_ELSEWHERE, REFUSAL_KEY

log = logging.getLogger(__name__)

WRITE_BINLOG = "/binlog.Pump/WriteBinlog"
WRITE_BINLOGS = "/binlogext.PumpBatch/WriteBinlogs"

# Statuses that no retry can cure: the binlog itself is unacceptable.
_FINAL = frozenset({Status.RESOURCE_EXHAUSTED, Status.INVALID_ARGUMENT})

# Statuses with which a server refuses a request before storing anything.
_DEFINITE = frozenset(
    {
        Status.INVALID_ARGUMENT,
        Status.NOT_FOUND,
        Status.ALREADY_EXISTS,
        Status.PERMISSION_DENIED,
        Status.RESOURCE_EXHAUSTED,
        Status.FAILED_PRECONDITION,
        Status.OUT_OF_RANGE,
        Status.UNIMPLEMENTED,
        Status.UNAUTHENTICATED,
        # A Go pump's handler returning an error surfaces as UNKNOWN.
        Status.UNKNOWN,
    }
)


class BatchRejected(Exception):
    """The pump cannot take this batch as one RPC; send its binlogs singly."""


class _Raw:
    """An already-marshalled request message for grpclib's ProtoCodec."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:
        return self.data


class _RawReply:
    """Lets grpclib's ProtoCodec hand over the reply bytes undecoded."""

    @staticmethod
    def FromString(data: bytes) -> bytes:
        return data


def status_failure(status: Status, message: str, reason: str = "") -> RpcFailure:
    """The failure a pump reported with gRPC ``status`` and refusal ``reason``:
    final for a binlog the pump can never take (too large, malformed);
    ``elsewhere`` (and certain) when the reason says the pump cannot take
    prewrites now; else ``uncertain`` unless the status says the request was
    refused before anything was stored."""
    if reason in PREWRITE_ELSEWHERE and status not in _FINAL:
        return RpcFailure(f"{status.name} ({reason}): {message}", elsewhere=True)
    return RpcFailure(
        f"{status.name}: {message}",
        retriable=status not in _FINAL,
        uncertain=status not in _DEFINITE,
    )


def _refusal_reason(stream: Any) -> str:
    """The pump's refusal reason in the trailing metadata of a failed call ("" if none)."""
    metadata = getattr(stream, "trailing_metadata", None) or {}
    reason = metadata.get(REFUSAL_KEY, "")
    return reason if isinstance(reason, str) else ""


def classify(exc: BaseException, reason: str = "") -> RpcFailure:
    """Map a grpclib/OS failure of one call to an :class:`RpcFailure`.

    A GRPCError is a reply that arrived over a working connection, so unlike
    TiDB (whose gRPC reports broken connections as UNAVAILABLE too) the
    channel is reset only for connection-level failures."""
    if isinstance(exc, GRPCError):
        return status_failure(exc.status, str(exc.message), reason)
    if isinstance(exc, TimeoutError):
        return RpcFailure("deadline exceeded", uncertain=True)
    if isinstance(exc, ConnectionRefusedError):
        return RpcFailure(f"connection refused: {exc}", reset=True)
    if isinstance(exc, StreamTerminatedError | ProtocolError | OSError):
        return RpcFailure(f"{type(exc).__name__}: {exc}", uncertain=True, reset=True)
    raise TypeError(f"not a transport failure: {exc!r}")


def _with_header_status(e: GRPCError, stream: Any) -> GRPCError:
    """grpclib's server answers an unknown method with a trailers-only response
    that lacks ``content-type``, which grpclib's client reports as UNKNOWN
    although its ``grpc-status`` header says UNIMPLEMENTED; take the header's
    code then (a Go server sends the content type, so its code arrives as is)."""
    if e.status is not Status.UNKNOWN:
        return e
    headers = getattr(getattr(stream, "_stream", None), "headers", None) or ()
    for name, value in headers:
        if name == "grpc-status" and value.isdigit():
            try:
                return GRPCError(Status(int(value)), e.message, e.details)
            except ValueError:
                break
    return e


_UNIMPLEMENTED = frozenset({Status.UNIMPLEMENTED})
_BATCH_REJECTED = frozenset({Status.UNIMPLEMENTED, Status.RESOURCE_EXHAUSTED})
_TRANSPORT_ERRORS = (GRPCError, TimeoutError, StreamTerminatedError, ProtocolError, OSError)


class PumpTransport:
    """The connection to one pump. ``batch_supported`` turns False for good
    once the pump answers UNIMPLEMENTED to WriteBinlogs (a Go pump)."""

    def __init__(
        self,
        addr: str,
        cluster_id: int,
        stats: ClientStats,
        ssl_context: ssl.SSLContext | None = None,
        *,
        rpc_timeout: float = 15.0,
    ) -> None:
        self.addr = addr
        self.rpc_timeout = rpc_timeout
        self.cluster_id = cluster_id
        self.batch_supported = True
        self.stats = stats
        self._ssl = ssl_context
        self._channel: Any = None
        self._closed = False

    def _get_channel(self) -> Any:
        if self._closed:
            raise RpcFailure(f"connection to pump {self.addr} is closed")
        if self._channel is None:
            try:
                host, port = split_endpoint(self.addr)
            except AddressError as e:
                raise RpcFailure(f"pump address: {e}") from e
            self._channel = Channel(host, port, ssl=self._ssl)
        return self._channel

    def reset(self) -> None:
        """Drop the connection; the next call dials again."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def set_addr(self, addr: str) -> None:
        if addr != self.addr:
            self.addr = addr
            self.reset()

    def close(self) -> None:
        """Drop the connection for good: later calls fail without dialing."""
        self._closed = True
        self.reset()

    async def _call(
        self,
        method: str,
        data: bytes,
        passthrough: frozenset[Status] = frozenset(),
    ) -> tuple[list[str], list[int], list[str]]:
        """One unary call returning the reply's errmsgs, codes and reasons; a GRPCError
        whose status is in ``passthrough`` is re-raised as is, every other failure
        as an :class:`RpcFailure`."""
        channel = self._get_channel()
        reason = ""
        try:
            async with channel.request(
                method, Cardinality.UNARY_UNARY, _Raw, _RawReply, timeout=self.rpc_timeout
            ) as stream:
                try:
                    await stream.send_message(_Raw(data), end=True)
                    resp = await stream.recv_message()
                except GRPCError as e:
                    reason = _refusal_reason(stream)
                    raise _with_header_status(e, stream) from e.__cause__
        except _TRANSPORT_ERRORS as e:
            if isinstance(e, GRPCError) and e.status in passthrough:
                raise
            self.stats.rpc_errors += 1
            failure = classify(e, reason)
            if failure.reset and self._channel is channel:
                self.reset()
            raise failure from e
        try:
            if resp is None:
                raise DecodeError("no response message")
            return decode_reply(resp)
        except DecodeError as e:
            self.stats.rpc_errors += 1
            raise RpcFailure(f"pump {self.addr} sent a bad response: {e}", uncertain=True) from e

    async def write_one(self, payload: bytes) -> None:
        """binlog.Pump/WriteBinlog; a non-empty errmsg is a (definite) failure."""
        self.stats.unary_rpcs += 1
        data = encode_write_binlog_req(self.cluster_id, payload)
        errmsgs, _, _ = await self._call(WRITE_BINLOG, data)
        if errmsgs and errmsgs[-1]:  # proto3: the last value of a field wins
            self.stats.rpc_errors += 1
            raise RpcFailure(f"pump {self.addr}: {errmsgs[-1]}")

    async def write_many(self, payloads: Sequence[bytes]) -> list[RpcFailure | None]:
        """binlogext.PumpBatch/WriteBinlogs: one result per payload (None =
        stored), classified by the reply's per-payload code when it has one.

        Raises :class:`BatchRejected` when the pump lacks the method or the
        batch is too large as a whole, :class:`RpcFailure` otherwise.
        """
        self.stats.batch_rpcs += 1
        self.stats.batched_binlogs += len(payloads)
        data = encode_write_binlogs_req(self.cluster_id, payloads)
        passthrough = _BATCH_REJECTED if len(payloads) > 1 else _UNIMPLEMENTED
        try:
            errmsgs, codes, reasons = await self._call(WRITE_BINLOGS, data, passthrough)
        except GRPCError as e:
            if e.status is Status.UNIMPLEMENTED:
                log.info("pump %s has no PumpBatch service; using unary writes", self.addr)
                self.batch_supported = False
            raise BatchRejected(f"{e.status.name}: {e.message}") from e
        if (
            len(errmsgs) != len(payloads)
            or len(codes) not in (0, len(payloads))
            or len(reasons) not in (0, len(payloads))
        ):
            self.stats.rpc_errors += 1
            raise RpcFailure(
                f"pump {self.addr} answered {len(errmsgs)} results for {len(payloads)} binlogs",
                uncertain=True,
            )
        results = [
            self._item_result(m, codes[i] if codes else 0, reasons[i] if reasons else "")
            for i, m in enumerate(errmsgs)
        ]
        self.stats.rpc_errors += sum(r is not None for r in results)
        return results

    def _item_result(self, errmsg: str, code: int, reason: str) -> RpcFailure | None:
        if code:
            try:
                status = Status(code)
            except ValueError:
                status = Status.UNKNOWN
            return status_failure(status, f"pump {self.addr}: {errmsg}", reason)
        return RpcFailure(f"pump {self.addr}: {errmsg}") if errmsg else None
