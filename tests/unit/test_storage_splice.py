"""The byte-level splice of a prewrite into its commit equals decode/copy/re-encode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.pump.storage.splice import attach_prewrite
from tributary.wire.binlog import Binlog, BinlogType
from tributary.wire.peek import MalformedBinlog

INT64 = st.integers(0, 2**63 - 1)

binlogs = st.builds(
    Binlog,
    tp=st.sampled_from(list(BinlogType)),
    start_ts=INT64,
    commit_ts=INT64,
    prewrite_key=st.binary(max_size=20),
    prewrite_value=st.binary(max_size=200),
    ddl_query=st.binary(max_size=40),
    ddl_job_id=st.integers(-(2**63), 2**63 - 1),
    ddl_schema_state=st.integers(-(2**31), 2**31 - 1),
)


def reference(c: Binlog, p: Binlog) -> Binlog:
    """What ``PullCommitBinlog`` does in Go."""
    out = Binlog().parse(bytes(c))
    out.prewrite_value = p.prewrite_value
    out.ddl_query = p.ddl_query
    out.ddl_job_id = p.ddl_job_id
    out.ddl_schema_state = p.ddl_schema_state
    return out


def fields(b: Binlog) -> tuple[object, ...]:
    return (
        b.tp,
        b.start_ts,
        b.commit_ts,
        b.prewrite_key,
        b.prewrite_value,
        b.ddl_query,
        b.ddl_job_id,
        b.ddl_schema_state,
    )


@settings(max_examples=300, deadline=None)
@given(binlogs, binlogs)
def test_splice_matches_decode_copy_reencode(c: Binlog, p: Binlog) -> None:
    merged = Binlog().parse(attach_prewrite(bytes(c), bytes(p)))
    assert fields(merged) == fields(reference(c, p))


def test_fields_of_the_commit_are_replaced_not_merged() -> None:
    c = Binlog(
        tp=BinlogType(BinlogType.Commit), start_ts=1, commit_ts=2, ddl_job_id=9, ddl_query=b"x"
    )
    p = Binlog(tp=BinlogType(BinlogType.Prewrite), start_ts=1, prewrite_value=b"v")
    merged = Binlog().parse(attach_prewrite(bytes(c), bytes(p)))
    assert (merged.ddl_job_id, merged.ddl_query, merged.prewrite_value) == (0, b"", b"v")


def test_malformed_input_is_rejected() -> None:
    with pytest.raises(MalformedBinlog):
        attach_prewrite(b"\x08", b"")
    with pytest.raises(MalformedBinlog):
        attach_prewrite(b"", b"\x2a\x05ab")
