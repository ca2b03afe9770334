"""The pump's hand-marshalled PullBinlogs replies equal betterproto's, byte for byte, and
its blocks of framed replies hold each whole message once, in order."""

from __future__ import annotations

import pytest

from services.pump.pullwire import encode_pull_resp, frame_replies, grpc_frame
from tributary.wire.binlog import Entity, Meta, PullBinlogResp

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
