"""The pump's replies on ``binlog.Pump/PullBinlogs``, marshalled by hand, and its unary
``WriteBinlog`` request read by hand.

Building a betterproto ``PullBinlogResp(entity=Entity(payload, meta=Meta(..)))`` and
marshalling it cost about half of a pump's CPU while a drainer caught up on a backlog (profiled:
betterproto's attribute hooks and ``bytes()``), more than reading the binlogs from disk. A reply
here is a few concatenations of bytes the pump already holds.

``PullCodec`` is the gRPC server's codec: it passes an ``EncodedReply`` through as it is and
encodes every other message as grpclib's protobuf codec does, so the other RPCs are untouched.
For ``WriteBinlog`` (a request per binlog from TiDB) betterproto's decode and encode were a
sixth of the pump's CPU under TiDB's pump client (profiled): a request given the type
``WriteBinlogReqView`` is read by ``tributary.wire.views`` (the payload is one slice), and
the reply, an empty ``WriteBinlogResp``, is ``EMPTY_REPLY``: zero bytes, as betterproto
writes a message whose fields are all empty.

Invariant: ``encode_pull_resp`` gives exactly the bytes betterproto writes for the same reply
(proto3: ``entity`` = 1; in ``Entity``, ``payload`` = 2, ``meta`` = 4; in ``Meta``,
``start_ts`` = 1, ``commit_ts`` = 2; zero scalars and empty bytes left out), so any client,
TiDB's Go drainer included, reads the same message; the unit tests compare the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpclib.encoding.proto import ProtoCodec

from tributary.varint import varint
from tributary.wire.views import WriteBinlogReqView, parse_write_binlog_req


@dataclass(frozen=True, slots=True)
class EncodedReply:
    """A reply already marshalled."""

    data: bytes


EMPTY_REPLY = EncodedReply(b"")  # a WriteBinlogResp with an empty errmsg (success)


def _len_field(tag: bytes, value: bytes) -> bytes:
    return tag + varint(len(value)) + value


def encode_pull_resp(payload: bytes, start_ts: int, commit_ts: int) -> bytes:
    """``PullBinlogResp{entity: Entity{payload, meta: Meta{start_ts, commit_ts}}}``."""
    meta = b""
    if start_ts:
        meta += b"\x08" + varint(start_ts)
    if commit_ts:
        meta += b"\x10" + varint(commit_ts)
    entity = _len_field(b"\x22", meta)  # an empty Meta is still present, as betterproto sets it
    if payload:
        entity = _len_field(b"\x12", payload) + entity
    return _len_field(b"\x0a", entity)


class PullCodec(ProtoCodec):
    """grpclib's protobuf codec, with pre-marshalled replies passed through."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        if type(message) is EncodedReply:
            return message.data
        return super().encode(message, message_type)

    def decode(self, data: bytes, message_type: Any) -> Any:
        if message_type is WriteBinlogReqView:
            return parse_write_binlog_req(data)
        return super().decode(data, message_type)
