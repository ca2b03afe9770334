"""The pump's replies on ``binlog.Pump/PullBinlogs``, marshalled by hand and sent in blocks,
and its unary ``WriteBinlog`` request read by hand.

Building a betterproto ``PullBinlogResp(entity=Entity(payload, meta=Meta(..)))`` and
marshalling it cost about half of a pump's CPU while a drainer caught up on a backlog (profiled:
betterproto's attribute hooks and ``bytes()``), more than reading the binlogs from disk. A reply
here is a few concatenations of bytes the pump already holds.

Sending each reply with grpclib's ``send_message`` makes one HTTP/2 DATA frame per binlog, and
a receiver pays per frame (h2 parses it, builds an event and a ``repr`` of it, and counts
window), about as much as for the binlog itself. gRPC's framing lets a DATA frame carry many
length-prefixed messages, so ``frame_replies`` concatenates the replies the storage has ready
into blocks of up to ``BLOCK`` bytes (a bigger reply is a block on its own) and ``send_block``
writes a block through the stream as ``send_message`` writes one message: initial metadata
first, then the bytes, cut into frames as the peer's frame size and flow-control windows allow.
Any gRPC client reads the same messages (grpc-go, grpclib and betterproto stubs included).

``PumpCodec`` is the gRPC server's codec: it passes an ``EncodedReply`` through as it is, reads
a request given the type ``WriteBinlogReqView`` by hand, and treats every other message as our
servers' protobuf codec does (``servicekit.grpcserver``), so the other RPCs are untouched; a
request it cannot read is answered INTERNAL, as every other undecodable request.
For ``WriteBinlog`` (a request per binlog from TiDB) betterproto's decode and encode were a
sixth of the pump's CPU under TiDB's pump client (profiled): a request given the type
``WriteBinlogReqView`` is read by ``tributary.wire.views`` (the payload is one slice), and
the reply, an empty ``WriteBinlogResp``, is ``EMPTY_REPLY``: zero bytes, as betterproto
writes a message whose fields are all empty.

Invariants: ``encode_pull_resp`` gives exactly the bytes betterproto writes for the same reply
(proto3: ``entity`` = 1; in ``Entity``, ``payload`` = 2, ``meta`` = 4; in ``Meta``,
``start_ts`` = 1, ``commit_ts`` = 2; zero scalars and empty bytes left out), the unit tests
compare the two; blocks hold whole messages, in the order given, each exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from grpclib.server import Stream

from tributary.servicekit.grpcserver import ServerProtoCodec, undecodable
from tributary.varint import varint
from tributary.wire.views import MalformedMessage, WriteBinlogReqView, parse_write_binlog_req

BLOCK = 128 << 10  # bytes of framed replies per write, unless one reply alone is bigger


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


def grpc_frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message, uncompressed: flag 0, length (4 bytes, big endian)."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def frame_replies(messages: Iterable[bytes], limit: int = BLOCK) -> Iterator[tuple[bytes, int]]:
    """``messages`` framed and concatenated into blocks of at most ``limit`` bytes each (a
    message framed bigger than ``limit`` is a block alone), in order: (block, messages in it).

    Worked example, ``limit`` 100: messages of 40, 40, 150 and 10 bytes frame to 45, 45, 155
    and 15 bytes; the blocks are (45 + 45 bytes, 2), (155, 1), (15, 1)."""
    block: list[bytes] = []
    size = 0
    for message in messages:
        framed = grpc_frame(message)
        if block and size + len(framed) > limit:
            yield b"".join(block), len(block)
            block, size = [], 0
        block.append(framed)
        size += len(framed)
    if block:
        yield b"".join(block), len(block)


async def send_block(stream: Stream[Any, Any], block: bytes, messages: int) -> None:
    """Send ``block`` (``messages`` framed replies) on a server-streaming call.

    grpclib has no public call for bytes already framed; this is ``Stream.send_message``
    without the codec and the per-message prefix: the same initial metadata, the same
    flow-controlled write (``protocol.Stream.send_data``) and the same counters. grpclib's
    ``SendMessage`` event is not dispatched (the pump listens to none)."""
    if not stream._send_initial_metadata_done:
        await stream.send_initial_metadata()
    await stream._stream.send_data(block)
    stream._send_message_done = True
    stream._messages_sent += messages
    connection = stream._stream.connection
    connection.messages_sent += messages
    connection.last_message_sent = connection.last_data_sent


class PumpCodec(ServerProtoCodec):
    """Our servers' protobuf codec, with pre-marshalled replies passed through and
    ``WriteBinlog`` requests read by hand."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        if type(message) is EncodedReply:
            return message.data
        return super().encode(message, message_type)

    def decode(self, data: bytes, message_type: Any) -> Any:
        if message_type is WriteBinlogReqView:
            try:
                return parse_write_binlog_req(data)
            except MalformedMessage as e:
                raise undecodable(e) from e
        return super().decode(data, message_type)
