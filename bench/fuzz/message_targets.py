"""Fuzz targets for messages other programs write: Kafka messages and the file sink's pb files.

The arbiter's reading of tidb-binlog's secondary binlog (``services.arbiter.syncer.decode``:
every refusal a ``MalformedMessage``; ``secondary_read``: the hand-written reader against the
generated classes, the same transaction or both refusing), canal-json and Open Protocol
decoding (the Kafka sinks read messages back to rebuild the upstream), the avro protocol's
framed messages, the debezium sink's
reading of column defaults from the DDL text it carries, reparo's reading of a pb
binlog file (a segment written whole, then ``read_txns``), the TiDB row formats a drainer
decodes, the payloads the pump takes (``WriteBinlogReq`` then the binlog header) and the
drainer pulls, and what a consumer of the storage sink reads (TiCDC's CSV records, a table
version's ``schema.json``, a data file's path).
"""

from __future__ import annotations

import atexit
import datetime as dt
import shutil
import tempfile
from decimal import Decimal
from pathlib import Path

from services.arbiter.syncer import decode as arbiter_decode
from services.reparo.reader import read_txns
from tests.support import secondary_reference
from tributary.change import ColumnInfo, Ddl, RowChange, RowKind, TableInfo, Txn
from tributary.sinks.file import binlogfile, pbcodec
from tributary.sinks.kafka import avro, canal, openproto, secondary
from tributary.sinks.kafka.avro_types import Options as AvroOptions
from tributary.sinks.kafka.debezium_defaults import DefaultsFromDdl
from tributary.sinks.storage import csvcodec, tabledef
from tributary.sinks.storage.layout import DataPath
from tributary.sinks.storage.settings import CsvSettings
from tributary.tidbcodec import row as tidbrow
from tributary.tidbcodec.datum import BytesDatum, IntDatum, NullDatum
from tributary.wire import peek, views
from tributary.wire.binlog import Entity, PullBinlogResp, WriteBinlogReq

_T = TableInfo(
    "shop",
    "orders",
    (
        ColumnInfo("id", "bigint", is_pk=True),
        ColumnInfo("price", "decimal(10,2)"),
        ColumnInfo("state", "varchar(16)"),
        ColumnInfo("note", "blob"),
        ColumnInfo("f", "double"),
    ),
    primary_key=("id",),
)
_NEW = {"id": 7, "price": Decimal("15.00"), "state": "paid", "note": b"\x00\xff", "f": 1.5}
_OLD = {"id": 7, "price": Decimal("12.50"), "state": "new", "note": None, "f": -0.0}
_ROWS = (
    RowChange(RowKind.INSERT, _T, _NEW),
    RowChange(RowKind.UPDATE, _T, _NEW, _OLD),
    RowChange(RowKind.DELETE, _T, _OLD),
)
_DDL = Ddl("shop", "ALTER TABLE orders ADD COLUMN x int", "orders")


def arbiter_message(raw: bytes) -> None:
    arbiter_decode("binlog", 0, 1, raw)


def secondary_seeds() -> list[bytes]:
    out = [
        secondary.encode_txn(Txn(10, 9, rows=_ROWS)),
        secondary.encode_txn(Txn(11, 10, ddl=_DDL)),
    ]
    return [m for m in out if m]


def secondary_read(raw: bytes) -> None:
    """The hand-written reader against the generated betterproto classes: both take a message
    with the same transaction, or both refuse it; a disagreement is a crash."""
    try:
        want: object = secondary_reference.canonical(secondary_reference.decode_txn(raw))
    except Exception:  # the codec's errors, and ValueErrors of the values
        want = "refused"
    try:
        got: object = secondary_reference.canonical(secondary.decode_txn(raw))
    except secondary.SecondaryBinlogError:
        if want != "refused":
            raise AssertionError(f"refused what betterproto takes: {want}") from None
        raise
    if got != want:
        raise AssertionError(f"read {got}, betterproto {want}")


def secondary_read_seeds() -> list[bytes]:
    txns = secondary_reference.sample_txns()[:6]  # DDLs, then rows of every type
    return secondary_seeds() + [m for m in map(secondary.encode_txn, txns) if m]


def canal_message(raw: bytes) -> None:
    canal.decode(raw)


def canal_seeds() -> list[bytes]:
    cols = canal.Columns.of(_T)
    rows = [canal.encode_row(r, 10, cols, extension=e) for r in _ROWS for e in (False, True)]
    return [*rows, canal.encode_ddl(_DDL, 11, extension=True), canal.encode_watermark(12)]


_AVRO = avro.TablePlan.of(_T, AvroOptions(), "default", extension=True)


def avro_message(raw: bytes) -> None:
    """A message of the avro protocol, unframed and read with its table's value schema."""
    avro.decode(_AVRO.value, raw)


def avro_seeds() -> list[bytes]:
    return [
        avro.frame(9, _AVRO.value_body(r.values, RowKind.INSERT, 10))
        for r in _ROWS
        if r.kind is not RowKind.DELETE
    ] + [avro.frame(8, _AVRO.key_body({"id": 1}))]


def debezium_defaults(raw: bytes) -> None:
    """DDL text as the debezium sink reads column defaults from it: never an exception."""
    defaults = DefaultsFromDdl()
    for query in raw.decode("utf-8", "replace").split("\n"):
        defaults.observe(Ddl("shop", query))
    defaults.of("shop", "orders")


def debezium_defaults_seeds() -> list[bytes]:
    return [
        b"CREATE TABLE orders (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 7, c VARCHAR(9) "
        b"DEFAULT _utf8mb4'x', at DATETIME DEFAULT CURRENT_TIMESTAMP(3), b BIT(3) DEFAULT b'1')",
        b"ALTER TABLE orders ADD COLUMN m INT DEFAULT -1, ADD (o INT DEFAULT 1, p TEXT), "
        b"ALTER COLUMN n SET DEFAULT 3, CHANGE c d VARCHAR(9) DEFAULT 'y', DROP COLUMN p\n"
        b"RENAME TABLE orders TO o2, o2 TO orders\nDROP DATABASE shop",
    ]


_CSV = CsvSettings(include_commit_ts=True, output_old_value=True)
_DEF = tabledef.TableDefinition.of(_T, 3)


def storage_csv(raw: bytes) -> None:
    """A CSV data file's records as values of the table's columns (``reader.read_rows``)."""
    cols = _DEF.columns or ()
    for record in csvcodec.parse(raw.decode("utf-8", "replace"), _CSV, "\n"):
        for col, text in zip(cols, record.values, strict=False):
            csvcodec.value_of(text, col)


def storage_csv_seeds() -> list[bytes]:
    encoder = csvcodec.CsvEncoder(_CSV, "\n")
    return [encoder.encode(r, 10 + n).encode() for n, r in enumerate(_ROWS)]


def storage_schema(raw: bytes) -> None:
    tabledef.parse(raw).table_info()


def storage_schema_seeds() -> list[bytes]:
    return [
        _DEF.render(),
        tabledef.TableDefinition("shop", "", 4, None, "CREATE DATABASE shop", 1).render(),
    ]


def storage_path(raw: bytes) -> None:
    for separator in ("none", "year", "month", "day"):
        DataPath.parse(raw.decode("utf-8", "replace"), separator, ".csv")


def storage_path_seeds() -> list[bytes]:
    return [b"shop/orders/437/2026-11-29/CDC000002.csv", b"shop/orders/437/CDC1.csv"]


def open_message(raw: bytes) -> None:
    """Key and value of one Kafka message: the first two bytes say where the key ends."""
    cut = int.from_bytes(raw[:2], "big") if len(raw) >= 2 else 0
    openproto.decode(raw[2 : 2 + cut], raw[2 + cut :])


def open_seeds() -> list[bytes]:
    cols = openproto.Columns.of(_T)
    pairs = [
        openproto.single(openproto.event_key(10, "shop", "orders", 1), openproto.row_value(r, cols))
        for r in _ROWS
    ]
    pairs.append(
        openproto.single(openproto.event_key(11, "shop", "orders", 2), openproto.ddl_value(_DDL))
    )
    pairs.append(openproto.resolved(12))
    return [len(k).to_bytes(2, "big") + k + v for k, v in pairs]


_SEGMENT = binlogfile.segment_name(0, dt.datetime(2024, 1, 1))
_scratch: list[Path] = []  # the directory reparo reads, made on first use


def _reparo_dir() -> Path:
    """Made when first needed, not at import (the temp dir of the moment may be a test's,
    removed with it), and made again if something removed it since."""
    if not _scratch or not _scratch[0].is_dir():
        made = Path(tempfile.mkdtemp(prefix="tributary-fuzz-reparo-"))
        atexit.register(shutil.rmtree, made, ignore_errors=True)
        _scratch[:] = [made]
    return _scratch[0]


def reparo_file(raw: bytes) -> None:
    """``raw`` as the one binlog file of a directory reparo replays."""
    scratch = _reparo_dir()
    (scratch / _SEGMENT).write_bytes(raw)
    for _ in read_txns(scratch):
        pass


def reparo_seeds() -> list[bytes]:
    txns = (Txn(10, 9, rows=_ROWS), Txn(11, 10, ddl=_DDL))
    return [b"".join(binlogfile.encode(p) for t in txns if (p := pbcodec.encode_txn(t)))]


def tidb_rows(raw: bytes) -> None:
    """The three TiDB old-format row encodings of ``TableMutation`` (first byte picks one)."""
    if not raw:
        return
    kind, data = raw[0] % 3, raw[1:]
    if kind == 0:
        tidbrow.decode_inserted_row(data, 1 + raw[0] // 3 % 2)
    elif kind == 1:
        tidbrow.decode_updated_row(data)
    else:
        tidbrow.decode_deleted_row(data)


def row_seeds() -> list[bytes]:
    cols = [(1, IntDatum(7)), (2, BytesDatum(b"paid")), (3, NullDatum())]
    return [
        b"\x00" + tidbrow.encode_inserted_row([IntDatum(7)], cols),
        b"\x01" + tidbrow.encode_updated_row(cols, cols[:2]),
        b"\x02" + tidbrow.encode_deleted_row(cols),
    ]


def write_binlog_req(raw: bytes) -> None:
    """The pump's WriteBinlog: the request, then the header of its payload (``intake``)."""
    req = views.parse_write_binlog_req(raw)
    if req.payload:
        peek.peek(req.payload)


def pull_payload(raw: bytes) -> None:
    """The drainer's PullBinlogs: the payload of a response, then its binlog header."""
    payload = views.pull_response_payload(raw)
    if payload:
        peek.peek(payload)


def wire_seeds(binlogs: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """(WriteBinlogReq seeds, PullBinlogResp seeds) around the marshalled ``binlogs``."""
    writes = [bytes(WriteBinlogReq(cluster_id=7, payload=b)) for b in binlogs]
    pulls = [bytes(PullBinlogResp(entity=Entity(payload=b))) for b in binlogs]
    return writes, pulls
