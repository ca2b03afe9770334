"""kafka:// options and message routing: tidb-binlog's layout by default, per-table and per-key
partitions and per-row messages as opt-ins, DDL on every partition, and the drainer.toml keys."""

from __future__ import annotations

import ssl
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.config.drainer import DrainerConfig
from tributary.settings import load
from tributary.sinks import SinkError
from tributary.sinks.kafka.options import parse_url
from tributary.sinks.kafka.routing import partition_of, route, row_key
from tributary.sinks.kafka.secondary import decode_txn
from tributary.sinks.urls import redact

T = TableInfo.build("db", "t", [("id", "bigint"), ("v", "varchar(8)")], ["id"])
U = TableInfo.build("db", "u", [("id", "bigint")], ["id"])


def txn() -> Txn:
    rows = (
        RowChange.insert(T, {"id": 1, "v": "a"}),
        RowChange.insert(U, {"id": 7}),
        RowChange.insert(T, {"id": 2, "v": "b"}),
        RowChange.update(T, {"id": 1, "v": "a"}, {"id": 1, "v": "c"}),
    )
    return Txn(40, 39, rows=rows)


def test_default_is_one_message_on_partition_0() -> None:
    (m,) = route(txn(), "fixed", "txn", 1)
    assert (m.partition, m.key) == (0, None)
    assert [r.values for r in decode_txn(m.value).rows] == [r.values for r in txn().rows]


def test_by_key_groups_rows_per_partition_in_order() -> None:
    messages = list(route(txn(), "key", "txn", 5))
    by_part = {m.partition: [r.values for r in decode_txn(m.value).rows] for m in messages}
    assert len(messages) == len(by_part)  # one message per partition touched
    k1 = partition_of(row_key(txn().rows[0]), 5)
    assert [v for v in by_part[k1] if v.get("v") is not None and v["id"] == 1] == [
        {"id": 1, "v": "a"},
        {"id": 1, "v": "c"},
    ]
    assert sum(len(v) for v in by_part.values()) == 4
    assert all(decode_txn(m.value).commit_ts == 40 for m in messages)


def test_per_row_messages_and_table_keys() -> None:
    messages = list(route(txn(), "table", "row", 4))
    assert [m.key for m in messages] == [b"db.t", b"db.u", b"db.t", b"db.t"]
    assert len({m.partition for m in messages if m.key == b"db.t"}) == 1
    assert [len(decode_txn(m.value).rows) for m in messages] == [1, 1, 1, 1]


def test_ddl_goes_to_every_partition() -> None:
    ddl = Txn(50, ddl=Ddl("db", "alter table t add c int", "t"))
    assert [m.partition for m in route(ddl, "key", "row", 3)] == [0, 1, 2]
    assert [m.partition for m in route(ddl, "fixed", "txn", 3)] == [0]
    assert list(route(Txn(60), "key", "txn", 3)) == []


def test_url_options() -> None:
    url = urlsplit(
        "kafka://app:s%40cret@k1:9092,k2:9092/x?kafka-exactly-once=true"
        "&kafka-partition-by=key&kafka-message-per=row&kafka-ssl-ca=/ca.pem"
    )
    s = parse_url(url, 7)
    assert s.brokers == ("k1:9092", "k2:9092") and s.topic == "x"
    assert s.exactly_once and s.checkpoint_topic == "x_checkpoint" and s.txn_id == "tributary-x"
    assert (s.partition_by, s.message_per) == ("key", "row")
    sec = s.security
    assert (sec.protocol, sec.sasl_mechanism, sec.sasl_user, sec.sasl_password) == (
        "SASL_SSL",
        "PLAIN",
        "app",
        "s@cret",
    )
    assert "s@cret" not in redact(url) and "cret" not in repr(s)
    plain = parse_url(urlsplit("kafka://k1:9092/"), 7)
    assert plain.topic == "7_obinlog" and plain.security.protocol == "PLAINTEXT"
    assert plain.single_stream and not plain.exactly_once
    with pytest.raises(SinkError, match="kafka-partition-by"):
        parse_url(urlsplit("kafka://k1:9092/?kafka-partition-by=column"), 7)
    with pytest.raises(SinkError, match="unknown options"):
        parse_url(urlsplit("kafka://k1:9092/?partition=1"), 7)


def test_drainer_toml_keys(tmp_path: Path) -> None:
    toml = tmp_path / "drainer.toml"
    toml.write_text(
        '[syncer]\ndb-type = "kafka"\n[syncer.to]\nkafka-addrs = "k1:9092"\n'
        'kafka-exactly-once = true\nkafka-partition-by = "table"\nkafka-sasl-mechanism = '
        '"SCRAM-SHA-256"\nkafka-sasl-user = "app"\nkafka-sasl-password = "p w"\n'
    )
    url = load(DrainerConfig, ["--config", str(toml)], {}, "DRAINER").syncer.sink_url("d")
    s = parse_url(urlsplit(url), 9)
    assert s.exactly_once and s.partition_by == "table" and s.message_per == "txn"
    assert (s.security.sasl_mechanism, s.security.sasl_user, s.security.sasl_password) == (
        "SCRAM-SHA-256",
        "app",
        "p w",
    )


def test_tls_files_that_do_not_load_are_a_sink_error(tmp_path: Path) -> None:
    missing = parse_url(urlsplit(f"kafka://k1:9092/?kafka-ssl-ca={tmp_path}/none.pem"), 7)
    with pytest.raises(SinkError, match=r"kafka TLS: .*none\.pem"):
        missing.client_kwargs()
    system = parse_url(urlsplit("kafka://k1:9092/?kafka-tls=true"), 7)
    assert system.client_kwargs()["ssl_context"].verify_mode == ssl.CERT_REQUIRED
