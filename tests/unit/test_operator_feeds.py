"""Changefeeds declared in the BinlogCluster spec (``captures.changefeeds``): parsing with every
problem listed, the sink URL each gets (SASL credentials in the user part, TLS files where the
capture pods mount them), the plan from the capture cluster's changefeeds to the declared ones,
the ``managed`` record, and the status entries; plus the capture Kafka sink's security keys."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from binlog_operator.feedspec import (
    Action,
    Actual,
    FeedSpec,
    parse_feeds,
    plan,
    sink_uri,
    still_managed,
)
from binlog_operator.feedsync import with_errors
from binlog_operator.kafkasink import KAFKA_TLS_DIR
from binlog_operator.manifests import build
from binlog_operator.spec import SpecError, parse
from tributary.sinks.kafka.cdc_base import parse_url
from tributary.sinks.port import SinkError
from tributary.sinks.urls import redact

ETCD = {"endpoints": ["http://etcd-0:2379"]}
UPSTREAM = {"name": "upstream", "key": "url"}
KAFKA = {
    "brokers": ["k-0:9092", "k-1:9092"],
    "topic": "orders",
    "protocol": "open-protocol",
    "partitionNum": 6,
    "dispatcher": "index-value",
    "topicRule": "{schema}_{table}",
    "sasl": {"secretName": "kafka-user", "mechanism": "SCRAM-SHA-256"},
    "tls": {"secretName": "kafka-ca", "certKey": "client.crt", "keyKey": "client.key"},
}


def feeds(raw: Any) -> tuple[FeedSpec, ...]:
    problems: list[str] = []
    found = parse_feeds(raw, problems)
    assert problems == []
    return found


def test_a_kafka_changefeed_gets_its_url_with_the_secret_credentials_and_mounted_files() -> None:
    (f,) = feeds([{"id": "orders-1", "kafka": KAFKA, "startTS": 42, "config": {"filter": {}}}])
    assert (f.id, f.start_ts, f.config) == ("orders-1", 42, {"filter": {}})
    uri = sink_uri(f, ("app", "p/w@:x"))
    tls = f"{KAFKA_TLS_DIR}/kafka-ca"
    assert uri == (
        "kafka://app:p%2Fw%40%3Ax@k-0:9092,k-1:9092/orders?protocol=open-protocol"
        "&partition-num=6&dispatcher=index-value&topic-rule=%7Bschema%7D_%7Btable%7D"
        f"&sasl-mechanism=SCRAM-SHA-256&enable-tls=true&ca={tls.replace('/', '%2F')}%2Fca.crt"
        f"&cert={tls.replace('/', '%2F')}%2Fclient.crt&key={tls.replace('/', '%2F')}%2Fclient.key"
    )
    assert redact(uri).startswith("kafka://app:******@k-0:9092,k-1:9092/orders?")
    with pytest.raises(ValueError, match="SASL credentials"):
        sink_uri(f)


def test_the_capture_sink_reads_the_operator_url() -> None:
    kafka = {**KAFKA, "protocol": "canal-json", "enableTidbExtension": True}
    (f,) = feeds([{"id": "o", "kafka": kafka}])
    uri = urlsplit(sink_uri(f, ("app", "p/w@:x")))
    query = "&".join(p for p in uri.query.split("&") if not p.startswith("protocol="))
    s = parse_url(uri._replace(query=query), "canal-json")
    assert s.brokers == ("k-0:9092", "k-1:9092")
    assert (s.topic, s.partition_num, s.dispatcher) == ("orders", 6, "index-value")
    assert s.extension and s.topic_rule == "{schema}_{table}"
    sec = s.security
    assert (sec.sasl_mechanism, sec.sasl_user, sec.sasl_password) == (
        "SCRAM-SHA-256",
        "app",
        "p/w@:x",
    )
    assert sec.tls and sec.ssl_ca == f"{KAFKA_TLS_DIR}/kafka-ca/ca.crt"
    assert sec.ssl_cert.endswith("/client.crt") and sec.ssl_key.endswith("/client.key")
    assert sec.protocol == "SASL_SSL"


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("sasl-mechanism=GSSAPI", "sasl-mechanism must be one of"),
        ("sasl-mechanism=PLAIN", "needs a user"),
        ("cert=/c.pem", "cert and key go together"),
        ("sasl-password=x", "unknown options"),
    ],
)
def test_the_capture_sink_refuses_bad_security_keys(query: str, error: str) -> None:
    with pytest.raises(SinkError, match=error):
        parse_url(urlsplit(f"kafka://k:9092/t?{query}"), "canal-json")


def test_a_plain_sink_url_is_passed_as_is() -> None:
    (f,) = feeds([{"id": "audit", "sinkURI": "file:///audit"}])
    assert sink_uri(f) == "file:///audit"
    assert f.kafka is None and f.start_ts == 0


def test_every_problem_is_listed() -> None:
    bad = [
        {"id": "Bad_id", "sinkURI": "mysql://u:pw@db:3306/", "extra": 1},
        {"id": "two", "sinkURI": "file:///x", "kafka": {"brokers": ["k:9092"], "topic": "t"}},
        {"id": "three"},
        {
            "id": "four",
            "kafka": {
                "brokers": ["not a broker"],
                "protocol": "maxwell",
                "partitionNum": 0,
                "dispatcher": "random",
                "enableTidbExtension": "yes",
                "sasl": {},
                "tls": {"secretName": "ca", "certKey": "c"},
            },
            "startTS": -1,
        },
        {"id": "three", "sinkURI": "nourl"},
    ]
    with pytest.raises(SpecError) as e:
        parse({"etcd": ETCD, "captures": {"changefeeds": bad}})
    problems = "\n".join(e.value.problems)
    for expected in (
        "changefeeds[0].extra: unknown field",
        "changefeeds[0].id: 'Bad_id'",
        "changefeeds[0].sinkURI: a URL with a password",
        "changefeeds[1]: sinkURI and kafka name the sink twice",
        "changefeeds[2]: a sink is required",
        "changefeeds[3].kafka.brokers: 'not a broker' is not a host:port",
        "changefeeds[3].kafka.topic: required",
        "changefeeds[3].kafka.protocol: 'maxwell'",
        "changefeeds[3].kafka.partitionNum: 0",
        "changefeeds[3].kafka.dispatcher: 'random'",
        "changefeeds[3].kafka.enableTidbExtension: 'yes'",
        "changefeeds[3].kafka.sasl.secretName: required",
        "changefeeds[3].kafka.tls: certKey and keyKey go together",
        "changefeeds[3].startTS: -1",
        "changefeeds[4].sinkURI: 'nourl'",
        "id 'three' is used twice",
    ):
        assert expected in problems, expected
    assert "pw" not in problems


def test_the_capture_pods_mount_each_tls_secret_once() -> None:
    k2 = {"brokers": ["k:9092"], "topic": "b", "tls": {"secretName": "kafka-ca"}}
    raw = {
        "etcd": ETCD,
        "captures": {
            "replicas": 2,
            "upstreamSecret": UPSTREAM,
            "changefeeds": [{"id": "a", "kafka": KAFKA}, {"id": "b", "kafka": k2}],
        },
    }
    built = {(o["kind"], o["metadata"]["name"]): o for o in build("c1", "ns", "u", parse(raw), 1)}
    pod = built[("StatefulSet", "c1-capture")]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"].startswith("feed-tls")]
    assert volume["secret"]["secretName"] == "kafka-ca"
    assert [i["key"] for i in volume["secret"]["items"]] == ["ca.crt", "client.crt", "client.key"]
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {
        "name": volume["name"],
        "mountPath": f"{KAFKA_TLS_DIR}/kafka-ca",
        "readOnly": True,
    }


def want(*specs: FeedSpec) -> dict[str, tuple[FeedSpec, str]]:
    return {f.id: (f, sink_uri(f)) for f in specs}


A = FeedSpec("a", "file:///a")
B = FeedSpec("b", "file:///b", config={"filter": {"rules": ["shop.*"]}})


def test_plan_creates_updates_and_removes_only_what_it_manages() -> None:
    actual = {
        "a": Actual("a", "file:///old", "normal"),
        "gone": Actual("gone", "file:///g", "normal"),
        "by-hand": Actual("by-hand", "file:///h", "normal"),
    }
    steps = plan(want(A, B), actual, {"a": A.config_hash, "gone": "x"})
    assert steps == [
        Action("update", "a", "file:///a", A, pause=True, resume=True),
        Action("create", "b", "file:///b", B),
        Action("remove", "gone"),
    ]


def test_plan_does_nothing_when_everything_matches() -> None:
    actual = {"a": Actual("a", "file:///a", "normal"), "b": Actual("b", "file:///b", "stopped")}
    managed = {"a": A.config_hash, "b": B.config_hash}
    assert plan(want(A, B), actual, managed) == []


def test_a_changed_config_updates_and_a_paused_feed_stays_paused() -> None:
    actual = {"b": Actual("b", "file:///b", "stopped")}
    (step,) = plan(want(B), actual, {"b": "old-hash"})
    assert (step.kind, step.pause, step.resume) == ("update", False, False)
    failed = {"b": Actual("b", "file:///x", "failed")}
    (step,) = plan(want(B), failed, {"b": B.config_hash})
    assert (step.kind, step.pause, step.resume) == ("update", False, True)
    # an adopted changefeed (not managed yet) is compared by its sink only
    assert plan(want(B), {"b": Actual("b", "file:///b", "normal")}, {}) == []
    assert plan(want(B), {"b": Actual("b", "file:///x", "finished")}, {}) == []


def test_the_managed_record_follows_what_was_done() -> None:
    wanted = want(A, B)
    actual = {"a": Actual("a", "file:///a", "normal"), "gone": Actual("gone", "u", "normal")}
    managed = {"gone": "g", "vanished": "v", "a": "old"}
    # b's creation failed, a's update failed, gone's removal failed
    assert still_managed(wanted, actual, managed, {}, set()) == {"a": "old", "gone": "g"}
    # everything went through
    applied = {"a": A.config_hash, "b": B.config_hash}
    after = still_managed(wanted, actual, managed, applied, {"gone"})
    assert after == {"a": A.config_hash, "b": B.config_hash}
    # found on the capture cluster, not managed yet: adopted with its declared config
    assert still_managed(wanted, actual, {}, {}, set()) == {"a": A.config_hash}


def test_status_shows_each_declared_feed_and_its_error() -> None:
    entries = [
        {"id": "a", "namespace": "default", "state": "normal"},
        {"id": "x", "namespace": "other", "state": "normal"},
    ]
    shown = with_errors(
        entries, ["a", "b", "c"], {"a": "update failed: HTTP 400", "b": "no Secret"}
    )
    assert shown == [
        {"id": "a", "namespace": "default", "state": "normal", "error": "update failed: HTTP 400"},
        {"id": "x", "namespace": "other", "state": "normal"},
        {"id": "b", "namespace": "default", "state": "pending", "error": "no Secret"},
        {"id": "c", "namespace": "default", "state": "pending"},
    ]


def test_sync_point_fields_go_into_the_replica_config_the_capture_takes() -> None:
    from tributary.cdc.replica import ReplicaConfig

    declared = {
        "id": "mirror",
        "sinkURI": "mysql://cdc@db:3306/",
        "enableSyncPoint": True,
        "syncPointInterval": "1m",
        "syncPointRetention": "2h",
        "config": {"filter": {"rules": ["shop.*"]}},
    }
    (f,) = feeds([declared])
    assert f.config == {
        "filter": {"rules": ["shop.*"]},
        "enable-sync-point": True,
        "sync-point-interval": "1m",
        "sync-point-retention": "2h",
    }
    taken = ReplicaConfig.from_dict(dict(f.config), strict=True)  # as the capture's API does
    assert (taken.enable_sync_point, taken.sync_point_interval, taken.sync_point_retention) == (
        True,
        60_000_000_000,
        7_200_000_000_000,
    )
    (plain,) = feeds([{**declared, "enableSyncPoint": False}])
    assert plain.config_hash != f.config_hash  # turning them off updates the changefeed
    (none,) = feeds([{"id": "mirror", "sinkURI": "mysql://cdc@db:3306/"}])
    assert none.config == {}  # no field, no key: older declarations keep their hash


def test_sync_point_fields_are_checked_as_ticdc_checks_them() -> None:
    base = {"sinkURI": "mysql://cdc@db:3306/", "enableSyncPoint": True}
    bad = [
        {"id": "a", **base, "syncPointInterval": "10s"},
        {"id": "b", **base, "syncPointRetention": "30m"},
        {"id": "c", **base, "syncPointInterval": "soon"},
        {"id": "d", "kafka": {**KAFKA, "sasl": None, "tls": None}, "enableSyncPoint": True},
        {"id": "e", **base, "enableSyncPoint": "yes"},
        {"id": "f", **base, "config": {"enable_sync_point": False}},
    ]
    problems: list[str] = []
    parse_feeds(bad, problems)
    text = "\n".join(problems)
    for expected in (
        "[0]: sync-point-interval 10s must be at least 30s",
        "[1]: sync-point-retention 30m0s must be at least 1h0m0s",
        "[2].syncPointInterval must be a duration",
        "[3].enableSyncPoint: sync points are written into a MySQL, MariaDB or TiDB",
        "[4].enableSyncPoint: 'yes' must be true or false",
        "[5].config.enable-sync-point: set by captures.changefeeds[5].enableSyncPoint",
    ):
        assert expected in text, (expected, text)
    off: list[str] = []  # off, TiCDC checks nothing: a short interval waits for turning on
    parse_feeds([{"id": "g", "sinkURI": "file:///x", "syncPointInterval": "10s"}], off)
    assert off == []
