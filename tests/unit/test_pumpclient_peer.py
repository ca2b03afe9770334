"""The pump client's hand-written wire encoders, against the generated classes and against a
scripted pump peer (``tests.support.scripted_pump``)."""

from __future__ import annotations

import pytest

from tests.support.scripted_pump import (
    ScriptedPump,
    running_pumps,
)
from tributary.pumpclient.codec import (
    DecodeError,
    decode_reply,
    encode_binlog,
    encode_write_binlog_req,
    encode_write_binlogs_req,
)
from tributary.pumpclient.stats import ClientStats
from tributary.pumpclient.transport import BatchRejected, PumpTransport
from tributary.varint import varint
from tributary.wire.binlog import Binlog, BinlogType, WriteBinlogReq, WriteBinlogResp
from tributary.wire.binlogext import WriteBinlogsReq, WriteBinlogsResp
from tributary.wire.peek import peek

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
    batch = bytes(
        WriteBinlogsResp(
            errmsgs=["", "disk full", ""], codes=[0, 14, 0], reasons=["", "disk-full", ""]
        )
    )
    assert decode_reply(batch) == (["", "disk full", ""], [0, 14, 0], ["", "disk-full", ""])
    unary = bytes(WriteBinlogResp(errmsg="no online: paused"))
    assert decode_reply(unary) == (["no online: paused"], [], [])
    assert decode_reply(bytes(WriteBinlogResp())) == ([], [], [])  # success: field omitted
    # codes unpacked (one varint per entry) read the same as packed
    assert decode_reply(b"\x0a\x00\x10\x00\x0a\x01x\x10\x08") == (["", "x"], [0, 8], [])
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
