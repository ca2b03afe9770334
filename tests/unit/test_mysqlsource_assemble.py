"""Binlog events made byte by byte -> the assembler's transactions: framing and CRC32, TABLE_MAP
with FULL metadata, rows, GTIDs, DDL and other statements, filters, rotation."""

from __future__ import annotations

import struct
import zlib

import pytest

from tributary.change import Ddl, RowKind, TableFilter
from tributary.sources.mysql import Position
from tributary.sources.mysql import events as ev
from tributary.sources.mysql.assemble import Assembler, SourceTxn
from tributary.sources.mysql.errors import ConfigurationError, MalformedEvent
from tributary.sources.mysql.schema import SchemaTracker
from tributary.sources.mysql.timestamps import next_ts

TABLE_ID = 42


def event(tp: int, body: bytes, *, ts: int = 100, log_pos: int = 0, server_id: int = 1) -> bytes:
    head = struct.pack("<IBIIIH", ts, tp, server_id, 19 + len(body) + 4, log_pos, 0)
    raw = head + body
    return raw + zlib.crc32(raw).to_bytes(4, "little")


def fde(server: bytes = b"10.11.6-MariaDB") -> bytes:
    post = bytearray(40)
    post[ev.QUERY_EVENT - 1] = 13
    post[ev.TABLE_MAP_EVENT - 1] = 8
    body = struct.pack("<H", 4) + server.ljust(50, b"\0") + struct.pack("<I", 0)
    return event(ev.FORMAT_DESCRIPTION_EVENT, body + bytes([19]) + bytes(post) + b"\x01")


def lenenc_str(s: bytes) -> bytes:
    return bytes([len(s)]) + s


def tlv(field: int, value: bytes) -> bytes:
    return bytes([field, len(value)]) + value


def table_map(
    schema: bytes = b"shop", table: bytes = b"t", *, names: bool = True, log_pos: int = 0
) -> bytes:
    """t(id bigint unsigned primary key, name varchar(20) utf8mb4 NULL)."""
    body = TABLE_ID.to_bytes(6, "little") + b"\x01\x00"
    body += lenenc_str(schema) + b"\0" + lenenc_str(table) + b"\0"
    body += b"\x02" + bytes([8, 15]) + b"\x02" + (80).to_bytes(2, "little") + b"\x02"
    body += tlv(1, b"\x80") + tlv(2, b"\x2d")
    if names:
        body += tlv(4, lenenc_str(b"id") + lenenc_str(b"name"))
    body += tlv(8, b"\x00")
    return event(ev.TABLE_MAP_EVENT, body, log_pos=log_pos)


def write_rows(*rows: tuple[int, bytes | None], log_pos: int = 0) -> bytes:
    body = TABLE_ID.to_bytes(6, "little") + b"\x01\x00" + b"\x02" + b"\x03"
    for id_, name in rows:
        body += b"\x02" if name is None else b"\x00"
        body += id_.to_bytes(8, "little")
        if name is not None:
            body += lenenc_str(name)
    return event(ev.WRITE_ROWS_V1, body, log_pos=log_pos)


def update_rows(old: tuple[int, bytes], new: tuple[int, bytes], log_pos: int = 0) -> bytes:
    body = TABLE_ID.to_bytes(6, "little") + b"\x01\x00" + b"\x02" + b"\x03\x03"
    for id_, name in (old, new):
        body += b"\x00" + id_.to_bytes(8, "little") + lenenc_str(name)
    return event(ev.UPDATE_ROWS_V1, body, log_pos=log_pos)


def gtid(seq: int, *, standalone: bool, log_pos: int = 0) -> bytes:
    return event(
        ev.MARIADB_GTID_EVENT, struct.pack("<QIB", seq, 0, int(standalone)), log_pos=log_pos
    )


def xid(*, ts: int = 100, log_pos: int = 0) -> bytes:
    return event(ev.XID_EVENT, struct.pack("<Q", 9), ts=ts, log_pos=log_pos)


def query(db: bytes, sql: bytes, *, ts: int = 100, log_pos: int = 0) -> bytes:
    post = struct.pack("<IIBHH", 1, 0, len(db), 0, 0)
    return event(ev.QUERY_EVENT, post + db + b"\0" + sql, ts=ts, log_pos=log_pos)


def assembler(table_filter: TableFilter | None = None, last_ts: int = 0) -> Assembler:
    a = Assembler(
        Position("b.000001", 4),
        last_ts,
        SchemaTracker(),
        table_filter or TableFilter(),
        checksum=True,
    )
    assert a.feed(fde()) is None
    return a


def feed_all(a: Assembler, events: list[bytes]) -> list[SourceTxn]:
    return [t for t in (a.feed(e) for e in events) if t is not None]


def test_a_transaction_with_full_metadata_decodes_rows_and_table_info() -> None:
    a = assembler(last_ts=5)
    [st] = feed_all(
        a,
        [
            gtid(7, standalone=False, log_pos=400),
            table_map(log_pos=480),
            write_rows((1, "héllo".encode()), (2**64 - 1, None), log_pos=560),
            update_rows((1, b"a"), (1, b"b"), log_pos=600),
            xid(ts=100, log_pos=631),
        ],
    )
    assert st.position == Position("b.000001", 631, "0-1-7")
    txn = st.txn
    assert txn.commit_ts == next_ts(100, 5) and txn.start_ts == txn.commit_ts - 1
    assert [(r.kind, dict(r.values)) for r in txn.rows] == [
        (RowKind.INSERT, {"id": 1, "name": "héllo"}),
        (RowKind.INSERT, {"id": 2**64 - 1, "name": None}),
        (RowKind.UPDATE, {"id": 1, "name": "b"}),
    ]
    assert txn.rows[2].old_values == {"id": 1, "name": "a"}
    info = txn.rows[0].table
    assert [(c.name, c.mysql_type) for c in info.columns] == [
        ("id", "bigint unsigned"),
        ("name", "varchar(20)"),
    ]
    assert info.primary_key == ("id",) and info.qualified == "shop.t"


@pytest.mark.parametrize(
    ("server", "signedness"), [(b"10.11.6-MariaDB-log", 0xA0), (b"8.0.36", 0x40)]
)
def test_signedness_bits_count_year_columns_only_from_mariadb(
    server: bytes, signedness: int
) -> None:
    """t(y year, i int, ub bigint unsigned): MariaDB has a SIGNEDNESS bit for y, MySQL not."""
    a = Assembler(Position("b.000001", 4), 0, SchemaTracker(), TableFilter(), checksum=True)
    assert a.feed(fde(server)) is None
    body = TABLE_ID.to_bytes(6, "little") + b"\x01\x00"
    body += lenenc_str(b"shop") + b"\0" + lenenc_str(b"u") + b"\0"
    body += b"\x03" + bytes([13, 3, 8]) + b"\x00" + b"\x07"
    body += tlv(1, bytes([signedness]))
    body += tlv(4, lenenc_str(b"y") + lenenc_str(b"i") + lenenc_str(b"ub"))
    rows = TABLE_ID.to_bytes(6, "little") + b"\x01\x00" + b"\x03" + b"\x07" + b"\x00"
    rows += bytes([124]) + (2**32 - 1).to_bytes(4, "little") + (2**64 - 1).to_bytes(8, "little")
    events = [
        gtid(1, standalone=False),
        event(ev.TABLE_MAP_EVENT, body),
        event(ev.WRITE_ROWS_V1, rows),
        xid(),
    ]
    [st] = feed_all(a, events)
    assert dict(st.txn.rows[0].values) == {"y": 2024, "i": -1, "ub": 2**64 - 1}
    types = [c.mysql_type for c in st.txn.rows[0].table.columns]
    assert types == ["year", "int", "bigint unsigned"]


def test_ddl_and_other_statements_outside_transactions() -> None:
    a = assembler()
    out = feed_all(
        a,
        [
            gtid(8, standalone=True),
            query(b"shop", b"ALTER TABLE t ADD COLUMN c int", ts=200, log_pos=700),
            gtid(9, standalone=True),
            query(b"", b"GRANT ALL ON *.* TO u", ts=200, log_pos=800),
        ],
    )
    ddl, grant = out
    assert ddl.txn.ddl == Ddl("shop", "ALTER TABLE t ADD COLUMN c int", "t")
    assert ddl.position == Position("b.000001", 700, "0-1-8")
    assert grant.txn.ddl is None and grant.txn.rows == ()
    assert grant.txn.commit_ts == ddl.txn.commit_ts + 1
    assert a.schema.version == 1 and a.schema.table_version("shop", "t") == 1


def test_begin_commit_and_rollback_queries() -> None:
    a = assembler()
    out = feed_all(
        a,
        [
            query(b"shop", b"BEGIN"),
            table_map(),
            write_rows((1, b"x")),
            query(b"shop", b"COMMIT", log_pos=900),
            query(b"shop", b"BEGIN"),
            table_map(),
            write_rows((2, b"y")),
            query(b"shop", b"ROLLBACK", log_pos=990),
        ],
    )
    assert [len(t.txn.rows) for t in out] == [1, 0]


def test_filtered_tables_are_not_decoded_and_leave_a_marker() -> None:
    a = assembler(TableFilter(ignore_dbs=["shop"]))
    # no column names: compiling this table would fail, so it is proven not to be compiled
    [st] = feed_all(
        a,
        [gtid(3, standalone=False), table_map(names=False), write_rows((1, b"x")), xid(log_pos=99)],
    )
    assert st.txn.rows == () and st.txn.ddl is None
    [ddl] = feed_all(a, [query(b"shop", b"DROP TABLE t", log_pos=120)])
    assert ddl.txn.ddl is None


def test_missing_column_names_is_a_configuration_error() -> None:
    a = assembler()
    a.feed(gtid(3, standalone=False))
    with pytest.raises(ConfigurationError, match="binlog_row_metadata=FULL") as caught:
        a.feed(table_map(names=False))
    assert not caught.value.retriable


def test_bad_checksum_and_orphan_rows_are_malformed() -> None:
    a = assembler()
    bad = bytearray(xid())
    bad[20] ^= 1
    with pytest.raises(MalformedEvent, match="CRC32"):
        a.feed(bytes(bad))
    with pytest.raises(MalformedEvent, match="no TABLE_MAP"):
        a.feed(write_rows((1, b"x")))


def test_rotate_moves_positions_to_the_next_file() -> None:
    a = assembler()
    rotate = event(ev.ROTATE_EVENT, struct.pack("<Q", 4) + b"b.000002", log_pos=0)
    [st] = feed_all(a, [rotate, fde(), query(b"s", b"CREATE DATABASE s", log_pos=300)])
    assert st.position == Position("b.000002", 300)
    assert st.txn.ddl == Ddl("s", "CREATE DATABASE s", "")


def test_a_compressed_transaction_payload_is_read_like_its_events() -> None:
    from tests.support.binlog_payload import payload_event, without_crc

    inner = [table_map(), write_rows((1, b"a"), (2, None)), xid(ts=200)]
    plain = feed_all(assembler(), [gtid(7, standalone=False), *inner[:2], xid(ts=200, log_pos=900)])
    for compression in (0, 255):
        wrapped = payload_event(
            [without_crc(e) for e in inner], ts=200, log_pos=900, compression=compression
        )
        [st] = feed_all(assembler(), [gtid(7, standalone=False), wrapped])
        assert st.txn.rows == plain[0].txn.rows and len(st.txn.rows) == 2
        assert st.position == plain[0].position == Position("b.000001", 900, "0-1-7")


def test_a_bad_transaction_payload_is_malformed_and_named() -> None:
    from tests.support.binlog_payload import packed, payload_event, without_crc

    inner = [without_crc(table_map()), without_crc(xid())]
    with pytest.raises(MalformedEvent, match="compression type 7"):
        assembler().feed(payload_event(inner, compression=7))
    good = bytearray(payload_event(inner, checksum=False))
    cut = bytes(good[:-3])  # truncated zstd frame
    for raw in (cut, bytes(good[:19]) + packed(1) + packed(1)):
        a = Assembler(Position("b", 4), 0, SchemaTracker(), TableFilter(), checksum=False)
        with pytest.raises(MalformedEvent, match="transaction payload"):
            a.feed(raw)
    nested = payload_event([without_crc(payload_event(inner))], log_pos=77)
    with pytest.raises(MalformedEvent, match=r"TRANSACTION_PAYLOAD_EVENT \(40\)"):
        assembler().feed(nested)


def test_event_types_not_understood_stop_the_source_with_their_name() -> None:
    a = assembler()
    a.feed(gtid(3, standalone=False))
    a.feed(table_map())
    with pytest.raises(MalformedEvent, match=r"XA_PREPARE_LOG_EVENT \(38\) at b.000001:500"):
        a.feed(event(38, b"\x00" * 8, log_pos=500))
    with pytest.raises(MalformedEvent, match=r"UNKNOWN_EVENT \(99\)"):
        assembler().feed(event(99, b"", log_pos=10))
    with pytest.raises(MalformedEvent, match=r"WRITE_ROWS_COMPRESSED_EVENT_V1 \(166\)"):
        assembler().feed(event(166, b"", log_pos=10))
    # Known comments and events flagged LOG_EVENT_IGNORABLE_F pass.
    b = assembler()
    ignorable = bytearray(event(99, b"", log_pos=10))
    ignorable[17] |= ev.IGNORABLE_FLAG
    ignorable[-4:] = zlib.crc32(bytes(ignorable[:-4])).to_bytes(4, "little")
    assert b.feed(bytes(ignorable)) is None
    assert b.feed(event(ev.MARIADB_ANNOTATE_ROWS, b"INSERT ...", log_pos=20)) is None
