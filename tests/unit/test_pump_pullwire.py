"""The pump's hand-marshalled PullBinlogs replies equal betterproto's, byte for byte, and
its blocks of framed replies hold each whole message once, in order."""

from __future__ import annotations

import pytest
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError

from services.pump.pullwire import (
    EMPTY_REPLY,
    EncodedReply,
    PumpCodec,
    encode_pull_resp,
    frame_replies,
    grpc_frame,
)
from tributary.wire.binlog import (
    Entity,
    Meta,
    PullBinlogReq,
    PullBinlogResp,
    WriteBinlogReq,
    WriteBinlogResp,
)
from tributary.wire.views import MalformedMessage, WriteBinlogReqView

BIG_TS = (1 << 62) + 12345  # a ts of the far future: a ten-byte varint


@pytest.mark.parametrize(
    ("payload", "start_ts", "commit_ts"),
    [
        (b"\x08\x02\x10\x05\x18\x07", 5, 7),
        (b"x" * 300, 449_000_000_000_000_001, 449_000_000_000_000_002),  # two-byte lengths
        (b"y" * 70_000, 1, BIG_TS),  # three-byte length
        (b"", 3, 3),  # nothing to carry: the payload field is left out
        (b"p", 0, 0),  # an empty Meta is still written
    ],
)
def test_replies_are_what_betterproto_writes(payload: bytes, start_ts: int, commit_ts: int) -> None:
    reply = PullBinlogResp(
        entity=Entity(payload=payload, meta=Meta(start_ts=start_ts, commit_ts=commit_ts))
    )
    encoded = encode_pull_resp(payload, start_ts, commit_ts)
    assert encoded == bytes(reply)
    back = PullBinlogResp().parse(encoded)
    assert (back.entity.payload, back.entity.meta.start_ts, back.entity.meta.commit_ts) == (
        payload,
        start_ts,
        commit_ts,
    )


def test_blocks_hold_whole_messages_in_order_up_to_the_limit() -> None:
    messages = [b"a" * 40, b"b" * 40, b"c" * 150, b"d" * 10, b""]
    blocks = list(frame_replies(messages, limit=100))
    assert [(len(block), count) for block, count in blocks] == [(90, 2), (155, 1), (20, 2)]
    stream = b"".join(block for block, _ in blocks)
    assert stream == b"".join(grpc_frame(m) for m in messages)
    got, pos = [], 0
    while pos < len(stream):  # what any gRPC reader does: flag, 4-byte length, message
        size = int.from_bytes(stream[pos + 1 : pos + 5], "big")
        assert stream[pos] == 0
        got.append(stream[pos + 5 : pos + 5 + size])
        pos += 5 + size
    assert got == messages
    assert list(frame_replies([])) == []


def test_the_codec_passes_encoded_replies_and_encodes_the_rest() -> None:
    codec = PumpCodec()
    assert codec.encode(EncodedReply(b"\x0a\x00"), PullBinlogResp) == b"\x0a\x00"
    message = WriteBinlogResp(errmsg="full")
    assert codec.encode(message, WriteBinlogResp) == ProtoCodec().encode(message, WriteBinlogResp)
    with pytest.raises(TypeError):  # the protobuf codec's type check still holds for the rest
        codec.encode(message, PullBinlogResp)
    assert isinstance(codec.decode(b"\x0a\x00", PullBinlogResp), PullBinlogResp)


@pytest.mark.parametrize(
    ("cluster_id", "payload"),
    [
        (6_900_000_000_000_000_001, b"\x08\x00\x10\x05" + b"v" * 1100),
        ((1 << 64) - 1, b""),  # a probe: the payload field is left out
        (0, b"x"),
    ],
)
def test_write_requests_read_as_betterproto_reads_them(cluster_id: int, payload: bytes) -> None:
    data = bytes(WriteBinlogReq(cluster_id=cluster_id, payload=payload))
    view = PumpCodec().decode(data, WriteBinlogReqView)
    assert (view.cluster_id, view.payload) == (cluster_id, payload)
    # unknown fields are skipped and the last occurrence of a field wins, as in betterproto
    doubled = data + b"\x1a\x02zz" + bytes(WriteBinlogReq(cluster_id=7))
    back = WriteBinlogReq().parse(doubled)
    view = PumpCodec().decode(doubled, WriteBinlogReqView)
    assert (view.cluster_id, view.payload) == (back.cluster_id, back.payload)


@pytest.mark.parametrize(
    ("data", "message_type"),
    [
        (b"\x12\x05ab", WriteBinlogReqView),  # payload runs past the end
        (b"\x0a\x01a", WriteBinlogReqView),  # cluster_id not a varint
        (b"\x0a\x01a", PullBinlogReq),  # read by betterproto
    ],
)
def test_undecodable_requests_are_answered_internal(data: bytes, message_type: type) -> None:
    with pytest.raises(GRPCError) as refused:
        PumpCodec().decode(data, message_type)
    assert refused.value.status is Status.INTERNAL
    assert refused.value.message is not None
    assert refused.value.message.startswith("cannot decode the request: ")
    if message_type is WriteBinlogReqView:
        assert isinstance(refused.value.__cause__, MalformedMessage)


def test_the_empty_write_reply_is_what_betterproto_writes() -> None:
    assert EMPTY_REPLY.data == bytes(WriteBinlogResp())
    assert PumpCodec().encode(EMPTY_REPLY, WriteBinlogResp) == b""
