"""TiCDC's Open Protocol codec, checked field by field against the documented format: the
batched key/value layout, event keys, column types, flags and values, DDL and resolved events,
and the claim-check reference."""

from __future__ import annotations

import base64
import json
import struct
from decimal import Decimal

from tributary.change import Ddl, RowChange, TableInfo
from tributary.sinks.kafka import openproto as op

T = TableInfo.build(
    "test",
    "t1",
    [
        ("id", "int"), ("val", "varchar(16)"), ("raw", "varbinary(8)"), ("doc", "blob"),
        ("price", "decimal(10,2)"), ("n", "bigint unsigned"), ("f", "float"), ("at", "datetime"),
        ("tags", "set('a','b','c')"), ("e", "enum('x','y')"), ("b", "bit(8)"), ("c", "char(4)"),
    ],
    ["id"],
)  # fmt: skip
U = TableInfo.build("test", "u", [("a", "int"), ("b", "int")], unique_keys={"ab": ["a", "b"]})


def unpack(key: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    """The layout by hand: version, then (length, key)...; (length, value)..., big-endian int64."""
    assert struct.unpack(">q", key[:8]) == (1,)
    out, k, v = [], 8, 0
    while k < len(key):
        (kl,) = struct.unpack(">q", key[k : k + 8])
        (vl,) = struct.unpack(">q", value[v : v + 8])
        out.append((key[k + 8 : k + 8 + kl], value[v + 8 : v + 8 + vl]))
        k, v = k + 8 + kl, v + 8 + vl
    assert (k, v) == (len(key), len(value))
    return out


F32 = struct.unpack("<f", struct.pack("<f", 153.123))[0]
ROW = {
    "id": 1, "val": "aa<b>", "raw": b"\x89PNG\r\n\x1a\n", "doc": b"\x00\x01",
    "price": Decimal("7.25"), "n": 2**64 - 1, "f": F32, "at": "2020-01-02 03:04:05",
    "tags": "a,c", "e": "y", "b": b"\x51", "c": None,
}  # fmt: skip


def test_row_event_as_documented() -> None:
    cols = op.Columns.of(T)
    key = op.event_key(415508878783938562, "test", "t1", op.ROW)
    assert key == b'{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}'
    value = json.loads(op.row_value(RowChange.insert(T, ROW), cols))
    assert list(value) == ["u"]
    u = value["u"]
    assert list(u) == sorted(ROW)  # Go writes a map in key order
    assert u["id"] == {"t": 3, "h": True, "f": 0x01 | 0x02 | 0x08, "v": 1}
    assert u["val"] == {"t": 15, "f": 0, "v": "aa<b>"}
    assert u["raw"] == {"t": 15, "f": 1, "v": "\\x89PNG\\r\\n\\x1a\\n"}
    assert u["doc"] == {"t": 252, "f": 1, "v": base64.b64encode(b"\x00\x01").decode()}
    assert u["price"] == {"t": 246, "f": 1, "v": "7.25"}
    assert u["n"] == {"t": 8, "f": 0x81, "v": 2**64 - 1}
    assert u["f"] == {"t": 4, "f": 1, "v": 153.123}
    assert u["at"] == {"t": 12, "f": 1, "v": "2020-01-02 03:04:05"}
    assert u["tags"] == {"t": 248, "f": 0, "v": 5}
    assert u["e"] == {"t": 247, "f": 0, "v": 2}
    assert u["b"] == {"t": 16, "f": 1, "v": 0x51}
    assert u["c"] == {"t": 254, "f": 0, "v": None}
    raw = op.row_value(RowChange.insert(T, ROW), cols)
    assert b'"v":"aa\\u003cb\\u003e"' in raw  # Go escapes <, > and & in strings
    assert b'"id":{"t":3,"h":true,"f":11,"v":1}' in raw  # field order t, h, f, v


def test_update_has_previous_values_and_delete_all_columns() -> None:
    cols = op.Columns.of(T)
    new = {**ROW, "val": "bb"}
    upd = json.loads(op.row_value(RowChange.update(T, ROW, new), cols))
    assert (
        list(upd) == ["u", "p"]
        and upd["u"]["val"]["v"] == "bb"
        and upd["p"]["val"]["v"] == ("aa<b>")
    )
    dele = json.loads(op.row_value(RowChange.delete(T, ROW), cols))
    assert list(dele) == ["d"] and len(dele["d"]) == len(ROW)


def test_unique_key_is_the_handle_without_a_primary_key() -> None:
    v = json.loads(op.row_value(RowChange.insert(U, {"a": 1, "b": 2}), op.Columns.of(U)))
    assert v["u"]["a"] == {"t": 3, "h": True, "f": 0x01 | 0x02 | 0x10 | 0x20, "v": 1}
    v = json.loads(op.row_value(RowChange.insert(U, {"a": 1, "b": None}), op.Columns.of(U)))
    assert "h" not in v["u"]["a"]  # a NULL in the key: no handle


def test_batch_layout_and_decode() -> None:
    batch = op.Batch()
    cols = op.Columns.of(T)
    changes = [RowChange.insert(T, {**ROW, "id": i}) for i in range(3)]
    for c in changes:
        batch.add(op.event_key(10, "test", "t1", op.ROW), op.row_value(c, cols))
    pairs = unpack(bytes(batch.key), bytes(batch.value))
    assert len(pairs) == 3 and all(json.loads(k)["t"] == 1 for k, _ in pairs)
    got = op.decode(bytes(batch.key), bytes(batch.value))
    assert [e.row.values["id"] for e in got if e.row] == [0, 1, 2]
    first = got[0].row
    assert first is not None and first.table.primary_key == ("id",)
    assert first.values["raw"] == ROW["raw"] and first.values["doc"] == ROW["doc"]
    assert first.values["val"] == "aa<b>" and first.values["n"] == 2**64 - 1


def test_batch_limits() -> None:
    batch = op.Batch()
    k, v = b"k" * 10, b"v" * 10
    assert batch.fits(k, v, 10, 1)  # the first event always goes in
    batch.add(k, v)
    assert not batch.fits(k, v, 10_000, 1)
    assert not batch.fits(k, v, batch.length + 35, 16)
    assert batch.fits(k, v, batch.length + 36, 16)


def test_ddl_and_resolved_events() -> None:
    query = "CREATE TABLE test.t1(id int primary key, val varchar(16))"
    key, value = op.single(op.event_key(415508856908021766, "test", "t1", op.DDL), op.ddl_value(
        Ddl("test", query, "t1")
    ))  # fmt: skip
    ((k, v),) = unpack(key, value)
    assert k == b'{"ts":415508856908021766,"scm":"test","tbl":"t1","t":2}'
    assert json.loads(v) == {"q": query, "t": 3}
    (event,) = op.decode(key, value)
    assert event.ddl == Ddl("test", query, "t1")
    key, value = op.resolved(415508881038376963)
    assert unpack(key, value) == [(b'{"ts":415508881038376963,"t":3}', b"")]
    assert value == b"\x00" * 8
    assert op.decode(key, value)[0].kind == op.RESOLVED
    assert op.event_key(5, "db", "", op.DDL) == b'{"ts":5,"scm":"db","t":2}'


def test_ddl_action_types() -> None:
    cases = {
        "CREATE DATABASE d": 1, "DROP DATABASE d": 2, "CREATE TABLE t (a int)": 3,
        "DROP TABLE t": 4, "ALTER TABLE t ADD COLUMN c int": 5, "ALTER TABLE t DROP COLUMN c": 6,
        "CREATE INDEX i ON t (a)": 7, "ALTER TABLE t ADD INDEX i (a)": 7, "DROP INDEX i ON t": 8,
        "TRUNCATE TABLE t": 11, "ALTER TABLE t MODIFY a bigint": 12, "RENAME TABLE a TO b": 14,
        "CREATE VIEW v AS SELECT 1": 21, "DROP VIEW v": 24, "ALTER TABLE t ADD PRIMARY KEY (a)": 32,
        "CREATE TABLE t (a int, view int)": 3, "GRANT ALL ON *.* TO u": 0,
    }  # fmt: skip
    assert {q: op.ddl_action(q) for q in cases} == cases


def test_claim_check_reference_keeps_only_the_handle() -> None:
    key = op.event_key(9, "test", "t1", op.ROW, location="file:///cc/x.json")
    assert key == b'{"ts":9,"scm":"test","tbl":"t1","t":1,"ccl":"file:///cc/x.json"}'
    ref = json.loads(op.row_value(RowChange.insert(T, ROW), op.Columns.of(T), only_handle=True))
    assert ref == {"u": {"id": {"t": 3, "h": True, "f": 11, "v": 1}}}


def test_go_quote_round_trips() -> None:
    for data in (b"\x89PNG\r\n\x1a\n", 'héllo "q" \\'.encode(), b"\xe2\x82", bytes(range(256))):
        assert op.go_unquote(op.go_quote(data)) == data
    assert op.go_quote(b'a"b\\\x00\x7f') == 'a\\"b\\\\\\x00\\x7f'
    assert op.go_float(1e21) == "1e+21" and op.go_float(1e-7) == "1e-7"
    assert op.go_float(1e16) == "10000000000000000" and op.go_float(0.0) == "0"
