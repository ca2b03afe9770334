"""``peek``: the pump's validating read of a binlog's header, against a plain field-by-field
reader of the same rules over valid binlogs and thousands of mutated ones."""

from __future__ import annotations

import random

import pytest

from tributary.varint import int64
from tributary.wire.binlog import Binlog, BinlogType
from tributary.wire.peek import BinlogHeader, MalformedBinlog, peek


def _reference(payload: bytes) -> BinlogHeader | str:
    """The header, or the words of the refusal: every key and varint read a byte at a time."""

    def varint(pos: int) -> tuple[int, int]:
        result = shift = 0
        while True:
            if pos >= len(payload):
                raise ValueError("truncated varint")
            b = payload[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result >= 1 << 64:
                    raise ValueError("varint overflows 64 bits")
                return result, pos
            shift += 7
            if shift >= 70:
                raise ValueError("varint too long")

    fields = {1: 0, 2: 0, 3: 0, 7: 0}
    pos = 0
    try:
        while pos < len(payload):
            key, pos = varint(pos)
            field, wire = key >> 3, key & 7
            if field == 0:
                return "field number 0"
            if wire == 0:
                value, pos = varint(pos)
                if field in fields:
                    fields[field] = value if field == 1 else int64(value)
            elif wire == 2:
                length, pos = varint(pos)
                pos += length
                if pos > len(payload):
                    return "runs past the end"
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return "unsupported wire type"
            if pos > len(payload):
                return "runs past the end"
    except ValueError as e:
        return str(e)
    if fields[1] not in {int(t) for t in BinlogType}:
        return "unknown binlog type"
    if fields[2] < 0 or fields[3] < 0:
        return "negative timestamp"
    return BinlogHeader(BinlogType(fields[1]), fields[2], fields[3], fields[7])


def _binlogs() -> list[bytes]:
    ts = 470729823844302848  # a TSO timestamp: nine-byte varints
    return [
        bytes(Binlog(tp=BinlogType(BinlogType.Prewrite), start_ts=ts, prewrite_key=b"k",
                     prewrite_value=b"v" * 1000)),
        bytes(Binlog(tp=BinlogType(BinlogType.Commit), start_ts=ts, commit_ts=ts + 5)),
        bytes(Binlog(tp=BinlogType(BinlogType.Rollback), start_ts=ts, commit_ts=ts)),
        bytes(Binlog(tp=BinlogType(BinlogType.Prewrite), start_ts=ts, ddl_query=b"create t",
                     ddl_job_id=42, ddl_schema_state=5)),
        bytes(Binlog()),
        bytes.fromhex("08011005") + bytes.fromhex("f807") + b"\x01",  # an unknown field 127
    ]  # fmt: skip


def _same(payload: bytes) -> BinlogHeader | str:
    want = _reference(payload)
    if isinstance(want, str):
        with pytest.raises(MalformedBinlog, match=want.split()[0]):
            peek(payload)
    else:
        assert peek(payload) == want
    return want


def test_valid_binlogs_give_their_header() -> None:
    for payload in _binlogs():
        _same(payload)
    commit = peek(_binlogs()[1])
    assert (commit.tp, commit.commit_ts - commit.start_ts) == (BinlogType.Commit, 5)


def test_mutated_and_cut_binlogs_are_read_or_refused_as_field_by_field() -> None:
    rng = random.Random(11)
    seeds = _binlogs()
    refused = 0
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randrange(1, 4)):
            if data and rng.random() < 0.6:
                data[rng.randrange(len(data))] = rng.randrange(256)
            else:
                data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        if data and rng.random() < 0.3:
            del data[rng.randrange(len(data)) :]
        refused += isinstance(_same(bytes(data)), str)
    assert 300 < refused < 2700  # both kinds are exercised
