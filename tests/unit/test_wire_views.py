"""The fast Binlog/PrewriteValue readers agree with betterproto on every message and reject
malformed bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.wire.binlog import (
    Binlog,
    BinlogType,
    Entity,
    Meta,
    MutationType,
    Pos,
    PrewriteValue,
    PullBinlogResp,
    TableMutation,
)
from tributary.wire.views import (
    MalformedMessage,
    parse_binlog,
    parse_prewrite_value,
    parse_pull_response,
    pull_response_payload,
)

i64 = st.integers(-(1 << 63), (1 << 63) - 1)
blobs = st.lists(st.binary(max_size=40), max_size=4)
kinds = st.sampled_from([MutationType.Insert, MutationType.Update, MutationType.DeleteRow])
mutations = st.builds(
    TableMutation,
    table_id=i64,
    inserted_rows=blobs,
    updated_rows=blobs,
    deleted_ids=st.lists(i64, max_size=3),
    deleted_pks=blobs,
    deleted_rows=blobs,
    sequence=st.lists(kinds, max_size=6),
)


@given(st.builds(PrewriteValue, schema_version=i64, mutations=st.lists(mutations, max_size=3)))
def test_prewrite_values_read_like_betterproto(pv: PrewriteValue) -> None:
    view = parse_prewrite_value(bytes(pv))
    assert view.schema_version == pv.schema_version
    assert len(view.mutations) == len(pv.mutations)
    for got, want in zip(view.mutations, pv.mutations, strict=True):
        assert got.table_id == want.table_id
        assert got.inserted_rows == want.inserted_rows
        assert got.updated_rows == want.updated_rows
        assert got.deleted_ids == want.deleted_ids
        assert got.deleted_pks == want.deleted_pks
        assert got.deleted_rows == want.deleted_rows
        assert got.sequence == [int(k) for k in want.sequence]


@given(
    st.builds(
        Binlog,
        tp=st.sampled_from(list(BinlogType)),
        start_ts=i64,
        commit_ts=i64,
        prewrite_key=st.binary(max_size=20),
        prewrite_value=st.binary(max_size=60),
        ddl_query=st.binary(max_size=60),
        ddl_job_id=i64,
        ddl_schema_state=st.integers(-(1 << 31), (1 << 31) - 1),
    )
)
def test_binlogs_read_like_betterproto(b: Binlog) -> None:
    view = parse_binlog(bytes(b))
    assert (view.tp, view.start_ts, view.commit_ts, view.ddl_job_id, view.ddl_schema_state) == (
        int(b.tp),
        b.start_ts,
        b.commit_ts,
        b.ddl_job_id,
        b.ddl_schema_state,
    )
    assert (view.prewrite_key, view.prewrite_value, view.ddl_query) == (
        b.prewrite_key,
        b.prewrite_value,
        b.ddl_query,
    )


def test_unpacked_sequence_as_proto2_writers_send_it() -> None:
    # field 7 (sequence), wire type 0, twice: Insert(0) then Update(1); proto2 does not pack
    data = bytes([0x08, 0x05, 0x38, 0x00, 0x38, 0x01])
    (m,) = parse_prewrite_value(bytes([0x12, len(data)]) + data).mutations
    assert (m.table_id, m.sequence) == (5, [0, 1])


def test_packed_ints_of_one_byte_and_of_more() -> None:
    # One-byte varints are read straight from the bytes; longer ones (300, -1 as int32, -7 as
    # int64: ten bytes each) through the varint reader, in the same packed run.
    seq = [MutationType(k) for k in (0, 2, 1)]
    m = TableMutation(table_id=1, deleted_ids=[5, 127, -7, 1 << 40], sequence=seq)
    (got,) = parse_prewrite_value(bytes(PrewriteValue(mutations=[m]))).mutations
    assert (got.deleted_ids, got.sequence) == ([5, 127, -7, 1 << 40], [0, 2, 1])
    minus_one = bytes([0xFF] * 9 + [0x01])
    packed = bytes([0x00, 0xAC, 0x02]) + minus_one + bytes([0x7F])  # 0, 300, -1, 127
    data = bytes([0x3A, len(packed)]) + packed
    (got,) = parse_prewrite_value(bytes([0x12, len(data)]) + data).mutations
    assert got.sequence == [0, 300, -1, 127]


@pytest.mark.parametrize(
    "data",
    [
        b"\x2a\x05ab",  # field 5 says 5 bytes, 2 follow
        b"\x10\xff",  # truncated varint
        b"\x10" + b"\xff" * 10 + b"\x01",  # varint too long
        b"\x00\x01",  # field number 0
        b"\x13",  # wire type 3 (groups)
        b"\x28\x05",  # prewrite_value (5) as a varint
    ],
)
def test_malformed_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(MalformedMessage):
        parse_binlog(data)


@given(
    st.builds(
        PullBinlogResp,
        entity=st.builds(
            Entity,
            pos=st.builds(Pos, suffix=st.integers(0, (1 << 64) - 1), offset=i64),
            payload=st.binary(max_size=60),
            checksum=st.binary(max_size=8),
            meta=st.builds(Meta, start_ts=i64, commit_ts=i64),
        ),
    )
)
def test_pull_responses_read_like_betterproto(resp: PullBinlogResp) -> None:
    view = parse_pull_response(bytes(resp))
    assert pull_response_payload(bytes(resp)) == resp.entity.payload
    assert view.entity.payload == resp.entity.payload
    assert (view.entity.meta.start_ts, view.entity.meta.commit_ts) == (
        resp.entity.meta.start_ts,
        resp.entity.meta.commit_ts,
    )


@settings(deadline=None, max_examples=30)
@given(st.lists(st.binary(min_size=100, max_size=20000), min_size=1, max_size=3), kinds)
def test_rows_of_every_length_read_like_betterproto(rows: list[bytes], kind: MutationType) -> None:
    # Row lengths take one, two or three varint bytes.
    m = TableMutation(table_id=5, inserted_rows=rows, deleted_rows=rows[::-1], sequence=[kind])
    view = parse_prewrite_value(bytes(PrewriteValue(schema_version=1, mutations=[m])))
    assert view.mutations[0].inserted_rows == rows
    assert view.mutations[0].deleted_rows == rows[::-1]


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x7f\x12",  # the entity runs past the end
        b"\x08\x01\x0a\x03\x12\x05a",  # the payload runs past the entity
        b"\x08",  # a truncated varint
        b"\x0b",  # a group (wire type 3)
        b"\x02\x00",  # field number 0
        b"\x08\x01",  # entity as a varint
        b"\x0a\x02\x10\x01",  # payload as a varint
    ],
)
def test_a_pull_payload_is_refused_where_the_whole_response_is(data: bytes) -> None:
    with pytest.raises(MalformedMessage):
        parse_pull_response(data)
    with pytest.raises(MalformedMessage):
        pull_response_payload(data)
