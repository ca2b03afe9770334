"""The hand-written secondary binlog reader (``secondary_read.decode_txn``) against the generated
betterproto classes (``Binlog().parse``, through the decoder kept in
``tests/support/secondary_reference.py``): the same transactions for everything the encoder
writes and for messages other writers could send (fields in any order, unknown fields, repeated
singular fields, non-minimal varints), and a ``SecondaryBinlogError`` wherever the generated
classes refuse a message."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import secondary_reference as ref
from tributary.change import RowChange, Txn
from tributary.sinks.kafka.secondary import encode_txn
from tributary.sinks.kafka.secondary_read import SecondaryBinlogError, decode_txn
from tributary.varint import varint
from tributary.wire.slave.binlog import Binlog


def key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def ld(field: int, payload: bytes) -> bytes:
    return key(field, 2) + varint(len(payload)) + payload


def vi(field: int, value: int) -> bytes:
    return key(field, 0) + varint(value)


def outcome(decode: object, payload: bytes) -> object:
    """The canonical transaction, or "refused"."""
    assert callable(decode)
    try:
        return ref.canonical(decode(payload))
    except SecondaryBinlogError:
        return "refused"
    except Exception:
        if decode is decode_txn:
            raise  # the reader refuses only with its own error
        return "refused"


def assert_same(payload: bytes) -> object:
    got = outcome(decode_txn, payload)
    assert got == outcome(ref.decode_txn, payload), payload.hex()
    return got


SAMPLES = [p for p in map(encode_txn, ref.sample_txns()) if p]


def test_every_sample_decodes_as_betterproto_does() -> None:
    for txn, payload in zip(ref.sample_txns(), SAMPLES, strict=True):
        got = decode_txn(payload)
        assert ref.canonical(got) == ref.canonical(ref.decode_txn(payload))
        assert (got.commit_ts, got.ddl, len(got.rows)) == (txn.commit_ts, txn.ddl, len(txn.rows))
        shapes = [
            (r.kind, r.table.qualified, r.table.primary_key, r.table.unique_keys) for r in got.rows
        ]
        assert shapes == [
            (r.kind, r.table.qualified, r.table.primary_key, r.table.unique_keys) for r in txn.rows
        ]


def test_values_as_the_sinks_take_them() -> None:
    row = ref.wide_row(1)
    [back] = decode_txn(encode_txn(Txn(5, rows=(RowChange.insert(ref.WIDE, row),))) or b"").rows
    v = back.values
    assert (v["id"], v["u"], v["si"]) == (1, (1 << 64) - 1, 65535)
    assert (v["dc"], v["dtm"], v["yr"], v["tm"]) == (
        "-12345678901234.123456",
        "2024-01-02 03:04:05.123456",
        0,
        "00:00:00",
    )
    assert (v["b1"], v["b64"], v["en"], v["st"]) == (1, 0, 3, 0)  # enum/set as numbers
    assert (v["bn"], v["tb"], v["js"], v["vcb"]) == (b"\0\1\2\3", b"", "null", "\x00bin")
    assert repr(v["fl"]) == "-0.0" and v["db"] == -1e308


def test_one_table_info_per_table_shape() -> None:
    a, b = (decode_txn(p) for p in SAMPLES[3:5])
    assert a.rows[0].table is b.rows[0].table is a.rows[1].table
    assert a.rows[0].table.column_names == ref.WIDE.column_names
    tables = {id(r.table) for p in SAMPLES for r in decode_txn(p).rows}
    assert len(tables) == 4  # WIDE, SMALL, NOKEY, UKONLY


# -- messages other writers could send ----------------------------------------------------
#
# ``rewrite`` takes an encoded message apart with a plain field walker of its own and writes it
# again with changes that must not change what it means: fields of different numbers in another
# order, unknown fields of every wire type at every level, an earlier copy of a singular field
# (the last one counts), keys and lengths as non-minimal varints.

NESTED: dict[str, dict[int, str]] = {
    "binlog": {3: "dml", 4: "ddl"},
    "dml": {1: "table"},
    "table": {3: "info", 4: "mutation", 5: "key"},
    "mutation": {2: "row", 3: "row"},
    "row": {1: "column"},
    "info": {},
    "key": {},
    "ddl": {},
    "column": {},
}
SINGULAR: dict[str, set[int]] = {
    "binlog": {1, 2, 3, 4, 5},
    "table": {1, 2},
    "mutation": {1, 2, 3},
    "info": {1, 2, 3, 4, 5},
    "key": {1},
    "ddl": {1, 2, 3},
    "column": {1, 2, 3, 4, 5, 6},
}
Field = tuple[int, int, bytes]  # number, wire type, value (the varint's bytes for wire 0)


def walk(data: bytes) -> list[Field]:
    out, pos = [], 0
    while pos < len(data):
        k, pos = read(data, pos)
        if k & 7 == 0:
            _, end = read(data, pos)
        elif k & 7 == 2:
            n, pos = read(data, pos)
            end = pos + n
        else:
            end = pos + (8 if k & 7 == 1 else 4)
        out.append((k >> 3, k & 7, data[pos:end]))
        pos = end
    return out


def read(data: bytes, pos: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = data[pos]
        v |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if b < 0x80:
            return v, pos


def padded(value: int, rng: random.Random) -> bytes:
    """``value`` as a varint of up to three more bytes than it needs (still at most 10)."""
    raw = bytearray(varint(value))
    for _ in range(min(rng.choice([0, 0, 1, 3]), 10 - len(raw))):
        raw[-1] |= 0x80
        raw.append(0)
    return bytes(raw)


def unknown(rng: random.Random) -> bytes:
    number = rng.choice([7, 8, 15, 16, 100, 2047, (1 << 29) - 1])
    wire = rng.choice([0, 1, 2, 5])
    value = {
        0: varint(rng.choice([0, 1, 300, (1 << 64) - 1])),
        1: bytes(rng.randrange(256) for _ in range(8)),
        2: varint(3) + b"\xff\x00\x80",
        5: b"\x01\x02\x03\x04",
    }[wire]
    return padded(number << 3 | wire, rng) + value


def emit(number: int, wire: int, value: bytes, rng: random.Random) -> bytes:
    if wire == 2:
        return padded(number << 3 | 2, rng) + padded(len(value), rng) + value
    return padded(number << 3 | wire, rng) + value


def rewrite(data: bytes, kind: str, rng: random.Random) -> bytes:
    fields = walk(data)
    nested = NESTED[kind]
    fields = [
        (n, w, rewrite(v, nested[n], rng) if n in nested and w == 2 else v) for n, w, v in fields
    ]
    order = {n: rng.random() for n, _, _ in fields}
    fields.sort(key=lambda f: order[f[0]])  # stable: repeated fields keep their order
    out = []
    for n, w, v in fields:
        if rng.random() < 0.2:
            out.append(unknown(rng))
        if n in SINGULAR.get(kind, ()) and rng.random() < 0.2:
            earlier = {0: varint(rng.randrange(1 << 20)), 1: bytes(8), 2: b"x"}[w]
            out.append(emit(n, w, v if n in nested else earlier, rng))
        out.append(emit(n, w, v, rng))
    if rng.random() < 0.3:
        out.append(unknown(rng))
    return b"".join(out)


def test_unknown_fields_order_repeats_and_long_varints_change_nothing() -> None:
    rng = random.Random(7)
    for payload in SAMPLES:
        want = assert_same(payload)
        for _ in range(8):
            changed = rewrite(payload, "binlog", rng)
            assert assert_same(changed) == want, changed.hex()


def test_a_later_singular_field_wins() -> None:
    ddl = ld(1, b"db") + ld(2, b"t") + ld(3, b"create table t (a int)")
    payload = vi(1, 1) + vi(2, 5) + ld(4, ld(1, b"old") + ld(3, b"drop")) + vi(2, 6) + ld(4, ddl)
    assert assert_same(payload) != "refused"
    assert decode_txn(payload).commit_ts == 6
    assert decode_txn(payload).ddl == ref.Ddl("db", "create table t (a int)", "t")
    # an update's rows: the last row and change_row count, an earlier one is only checked
    table = SAMPLES[-1][SAMPLES[-1].index(b"\x0a", 6) :]
    assert assert_same(SAMPLES[-1]) != "refused" and table


# -- refusals -------------------------------------------------------------------------------


def dml(table: bytes, ts: int = 5) -> bytes:
    return vi(1, 0) + vi(2, ts) + ld(3, ld(1, table))


INFO = ld(3, ld(1, b"a") + ld(2, b"int"))
GOOD_ROW = ld(2, ld(1, vi(2, 1)))


def mutation(body: bytes) -> bytes:
    return dml(ld(1, b"db") + ld(2, b"t") + INFO + ld(4, body))


MALFORMED = {
    "truncated varint": b"\x10\xff",
    "truncated key": b"\x90",
    "length past the end": b"\x1a\x05ab",
    "nested length past its message": ld(3, b"\x0a\x05") + b"abcde",
    "varint over 64 bits": b"\x10" + b"\xff" * 9 + b"\x7f",
    "varint of 11 bytes": b"\x10" + b"\xff" * 10 + b"\x01",
    "field number 0": b"\x00\x01" + vi(2, 5),
    "key over 32 bits": varint(1 << 32 | 0) + b"\x01" + vi(2, 5),
    "group": key(9, 3) + key(9, 4) + vi(2, 5),
    "wire type 6": key(9, 6) + vi(2, 5),
    "wire type 7": key(9, 7) + vi(2, 5),
    "commit_ts as bytes": ld(2, b"ab"),
    "dml_data as varint": vi(3, 1) + vi(2, 5),
    "truncated fixed64": vi(2, 5) + key(9, 1) + b"abc",
    "truncated fixed32": vi(2, 5) + key(9, 5) + b"ab",
    "time_zone not UTF-8": vi(2, 5) + ld(5, b"\xff"),
    "schema name not UTF-8": dml(ld(1, b"\xc0\x80")),
    "column name a surrogate": dml(ld(3, ld(1, "\ud800".encode("utf-8", "surrogatepass")))),
    "string value not UTF-8": mutation(ld(2, ld(1, ld(6, b"\xfe")))),
    "int64 as fixed64": mutation(ld(2, ld(1, key(2, 1) + bytes(8)))),
    "double as varint": mutation(ld(2, ld(1, vi(4, 1)))),
    "double cut short": mutation(ld(2, ld(1, key(4, 1) + b"abc"))),
    "column as varint": mutation(ld(2, vi(1, 1))),
    "row as varint": mutation(vi(2, 1)),
    "mutation type as bytes": mutation(ld(1, b"") + GOOD_ROW),
    "mutations as varint": dml(ld(1, b"db") + vi(4, 1)),
    "column value past its column": mutation(ld(2, ld(1, b"\x10"))),
    "mutation type past its mutation": dml(INFO + ld(4, GOOD_ROW + b"\x08") + ld(1, b"db")),
    "too few columns": mutation(ld(2, b"")),
    "too many columns": mutation(ld(2, ld(1, vi(2, 1)) + ld(1, vi(2, 2)))),
    "update without its old row": mutation(vi(1, 1) + GOOD_ROW),
    "key naming an unknown column": dml(INFO + ld(5, ld(1, b"PRIMARY") + ld(2, b"zz"))),
    "duplicate column names": dml(INFO + INFO),
    "year of a digit int() refuses": dml(
        ld(3, ld(1, b"y") + ld(2, b"year")) + ld(4, ld(2, ld(1, ld(6, "²".encode()))))
    ),
    "commit ts 0": vi(2, 0) + vi(1, 1),
    "negative commit ts": vi(2, (1 << 64) - 5),
    "empty": b"",
    "not protobuf": b"\xff\xff\xff",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_messages_are_refused_as_betterproto_refuses_them(name: str) -> None:
    payload = MALFORMED[name]
    try:
        ref.decode_txn(payload)
    except Exception:
        pass
    else:
        pytest.fail(f"the reference decoder takes {name}")
    with pytest.raises(SecondaryBinlogError, match="not a secondary binlog"):
        decode_txn(payload)


def test_what_the_codec_takes_odd_as_it_is() -> None:
    """Enums are int32 (an unknown one is a DML / an insert), bools any non-zero varint."""
    row = ld(2, ld(1, vi(1, 1 << 40)))  # is_null = 2**40: NULL
    for payload in (
        vi(1, (1 << 32) + 1) + vi(2, 5) + ld(4, ld(3, b"q")),  # type 2**32 + 1: DDL
        vi(1, 7) + vi(2, 5),  # an unknown binlog type: a DML, no rows
        mutation(vi(1, 9) + row),  # an unknown mutation type: an insert
        mutation(vi(1, (1 << 64) - 1) + row + ld(3, ld(1, vi(2, 1)) + ld(1, b""))),
        mutation(vi(1, 2) + GOOD_ROW + key(3, 2) + b"\x00"),  # a delete's change_row: checked
        mutation(ld(2, b"") + GOOD_ROW),  # an earlier row of too few columns: checked, unused
    ):
        assert assert_same(payload) != "refused", payload.hex()


def test_mutated_samples_are_taken_or_refused_alike() -> None:
    rng = random.Random(11)
    taken = 0
    for _ in range(1000):
        b = bytearray(rng.choice(SAMPLES))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(b))
            op = rng.randrange(4)
            if op == 0:
                b[i] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x22, rng.randrange(256)])
            elif op == 1:
                b[i] ^= 1 << rng.randrange(8)
            elif op == 2:
                b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
            else:
                del b[i : i + rng.randint(1, 4)]
        taken += assert_same(bytes(b)) != "refused"
    assert taken > 30  # some mutations still parse: both must give the same values


# -- generated messages ------------------------------------------------------------------

TYPES = ["bigint", "int", "double", "varchar", "blob", "json", "bit", "year", "enum", "decimal"]
varints = st.sampled_from([0, 1, 127, 128, 2021, (1 << 63) - 1, 1 << 63, (1 << 64) - 1])
texts = st.sampled_from([b"", b"2024", b"a", "é".encode(), b"\xff", "²".encode(), b"12a"])


@st.composite
def columns(draw: st.DrawFn) -> bytes:
    parts = []
    for number in draw(st.lists(st.integers(1, 7), max_size=3)):
        if number in (1, 2, 3):
            parts.append(vi(number, draw(varints)))
        elif number == 4:
            parts.append(key(4, 1) + struct.pack("<d", draw(st.floats())))
        elif number in (5, 6):
            parts.append(ld(number, draw(texts)))
        else:
            parts.append(vi(9, 1))
    return ld(1, b"".join(parts))


@st.composite
def tables(draw: st.DrawFn) -> bytes:
    types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=4))
    infos = b"".join(
        ld(3, ld(1, f"c{i}".encode()) + ld(2, t.encode()) + vi(4, 10)) for i, t in enumerate(types)
    )
    keys = draw(st.sampled_from([b"", ld(5, ld(1, b"PRIMARY") + ld(2, b"c0"))]))
    mutations = []
    for _ in range(draw(st.integers(0, 3))):
        width = len(types) + draw(st.sampled_from([0, 0, 0, 0, -1, 1]))
        row = ld(2, b"".join(draw(columns()) for _ in range(max(width, 0))))
        kind = draw(st.sampled_from([0, 1, 2]))
        old = ld(3, b"".join(draw(columns()) for _ in types)) if kind == 1 else b""
        mutations.append(ld(4, vi(1, kind) + row + old))
    return ld(1, ld(1, b"db") + ld(2, b"t") + infos + b"".join(mutations) + keys)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tables(), max_size=3), st.integers(1, 1 << 40))
def test_generated_tables_decode_as_betterproto_does(tables: list[bytes], ts: int) -> None:
    assert_same(vi(2, ts) + ld(3, b"".join(tables)))


def test_betterproto_reads_the_samples() -> None:
    """The reference really is the generated classes (not a copy of the reader)."""
    assert Binlog().parse(SAMPLES[3]).dml_data.tables[0].table_name == "wide"
