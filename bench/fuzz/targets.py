"""Fuzz targets: each parser that takes bytes from outside, with seeds of valid input.

A target is a function of ``bytes``; it may return anything or raise an error of our own type
(``TributaryError``: every parser's documented rejection). Anything else is a crash. The
binlog wire and the MySQL binlog are here; configs (``config_targets``), Kafka messages, pb
files and TiDB rows (``message_targets``) and the HTTP APIs (``http_targets``) beside.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from functools import partial

import zstandard

from bench.fuzz import config_targets as cfg
from bench.fuzz import http_targets as http
from bench.fuzz import message_targets as msg
from services.pump.storage import record
from tributary.cdc.model import ReplicaConfig
from tributary.change import TableFilter
from tributary.settings import from_toml
from tributary.sources.mysql import Position
from tributary.sources.mysql import payload as mysql_payload
from tributary.sources.mysql.assemble import Assembler
from tributary.sources.mysql.schema import SchemaTracker
from tributary.tidbcodec import json_decode
from tributary.tidbcodec.datum import decode_all
from tributary.wire import peek, views
from tributary.wire.binlog import Binlog, BinlogType, PrewriteValue, TableMutation


def _event(tp: int, body: bytes, log_pos: int = 0) -> bytes:
    return struct.pack("<IBIIIH", 100, tp, 1, 19 + len(body), log_pos, 0) + body


def _binlog_seeds() -> list[bytes]:
    pv = PrewriteValue(
        schema_version=3, mutations=[TableMutation(table_id=5, inserted_rows=[b"\x03\x02"])]
    )
    return [
        bytes(Binlog(tp=BinlogType.Prewrite, start_ts=10, prewrite_value=bytes(pv))),
        bytes(Binlog(tp=BinlogType.Commit, start_ts=10, commit_ts=11)),
        bytes(pv),
    ]


def _mysql_events(raw: bytes) -> None:
    a = Assembler(Position("f", 4), 0, SchemaTracker(), TableFilter(), checksum=False)
    p = 0
    while p + 19 <= len(raw):  # frame like a dump does: by each header's event size
        size = max(19, int.from_bytes(raw[p + 9 : p + 13], "little"))
        a.feed(raw[p : p + size])
        p += size


def _mysql_seeds() -> list[bytes]:
    query = _event(2, struct.pack("<IIBHH", 1, 0, 1, 0, 0) + b"s\0CREATE TABLE t (a int)", 200)
    gtid = _event(162, struct.pack("<QIB", 7, 0, 0), 120)
    xid = _event(16, struct.pack("<Q", 9), 300)
    inner = _event(16, struct.pack("<Q", 9))
    data = zstandard.ZstdCompressor().compress(inner)
    fields = bytes([1, 1, len(data), 2, 1, 0, 3, 1, len(inner), 0])
    return [query, gtid + xid, gtid + _event(40, fields + data, 400)]


def _payload(raw: bytes) -> None:
    mysql_payload.inner_events(_event(40, raw))


def _record_scan(raw: bytes) -> None:
    record.decode(raw)
    for _ in record.scan(raw, 0, len(raw)):
        pass


def _replica_config(raw: bytes) -> None:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return  # not JSON: the HTTP layer answers 400 before the config parser sees it
    ReplicaConfig.from_dict(doc, strict=True)


TARGETS: dict[str, tuple[Callable[[bytes], object], list[bytes]]] = {
    "peek": (peek.peek, _binlog_seeds()),
    "binlog_view": (views.parse_binlog, _binlog_seeds()),
    "prewrite_view": (views.parse_prewrite_value, _binlog_seeds()),
    "pull_response": (views.parse_pull_response, _binlog_seeds()),
    "datum": (decode_all, [b"\x03\x80\x00\x00\x00\x00\x00\x00\x01\x01abc\x00\x00\x00\x00\x00\xfc"]),
    "json": (lambda b: json_decode.decode(b[0], b[1:]) if b else None, [b"\x0c\x03abc", b"\x01"]),
    "vlog_record": (_record_scan, [record.encode(b"hello"), record.encode_batch([b"a", b"bb"])[0]]),
    "mysql_events": (_mysql_events, _mysql_seeds()),
    "mysql_payload": (_payload, [e[19:] for e in _mysql_seeds()[2:]]),
    "replica_config": (_replica_config, cfg.JSON_SEEDS),
    "write_binlog_req": (msg.write_binlog_req, msg.wire_seeds(_binlog_seeds())[0]),
    "pull_payload": (msg.pull_payload, msg.wire_seeds(_binlog_seeds())[1]),
    "tidb_rows": (msg.tidb_rows, msg.row_seeds()),
    "arbiter_message": (msg.arbiter_message, msg.secondary_seeds()),
    "secondary_read": (msg.secondary_read, msg.secondary_read_seeds()),
    "canal_json": (msg.canal_message, msg.canal_seeds()),
    "open_protocol": (msg.open_message, msg.open_seeds()),
    "debezium_defaults": (msg.debezium_defaults, msg.debezium_defaults_seeds()),
    "avro_message": (msg.avro_message, msg.avro_seeds()),
    "reparo_file": (msg.reparo_file, msg.reparo_seeds()),
    "storage_csv": (msg.storage_csv, msg.storage_csv_seeds()),
    "storage_schema": (msg.storage_schema, msg.storage_schema_seeds()),
    "storage_path": (msg.storage_path, msg.storage_path_seeds()),
    **{name: (partial(from_toml, cls), seeds) for name, (cls, seeds) in cfg.SETTINGS.items()},
    "changefeed_toml": (cfg.changefeed_toml, cfg.CHANGEFEED_SEEDS),
    "changefeed_json": (cfg.changefeed_json, cfg.JSON_SEEDS),
    "value_expr": (cfg.value_expr, cfg.EXPR_SEEDS),
    "http_pump": (http.pump_http, http.PUMP_SEEDS),
    "http_drainer": (http.drainer_http, http.DRAINER_SEEDS),
    "http_capture": (http.capture_http, http.CAPTURE_SEEDS),
}
