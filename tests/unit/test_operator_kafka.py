"""A drainer's Kafka sink in the BinlogCluster spec: parsing with every problem listed, the
rendered drainer.toml loaded by the drainer's own settings loader with the pod's env, and the
credentials kept out of the ConfigMap (env from a Secret, TLS files mounted from a Secret)."""

from __future__ import annotations

from typing import Any

import pytest

from binlog_operator.configs import check_all, check_drainer, drainer_toml
from binlog_operator.kafkasink import KAFKA_TLS_DIR, KafkaSasl, KafkaSpec, KafkaTls
from binlog_operator.manifests import build
from binlog_operator.spec import SpecError, parse, parse_drainer

ETCD = {"endpoints": ["http://etcd-0:2379"]}
KAFKA = {
    "brokers": ["kafka-0.kafka.data.svc:9092", "kafka-1.kafka.data.svc:9092"],
    "topic": "shop_binlog",
    "exactlyOnce": True,
    "partitionBy": "key",
    "messagePer": "row",
    "maxMessages": 256,
    "sasl": {"secretName": "kafka-user", "mechanism": "SCRAM-SHA-512"},
    "tls": {"secretName": "kafka-ca", "certKey": "client.crt", "keyKey": "client.key"},
}


def raw(kafka: Any = KAFKA, **drainer: Any) -> dict[str, Any]:
    return {"etcd": ETCD, "drainers": [{"name": "kafka", "kafka": kafka, **drainer}]}


def objects(spec_raw: dict[str, Any]) -> dict[tuple[str, str], Any]:
    built = build("c1", "ns1", "uid-1", parse(spec_raw), 1)
    return {(o["kind"], o["metadata"]["name"]): o for o in built}


def test_the_kafka_block_parses_with_the_documented_defaults() -> None:
    (d,) = parse(raw()).drainers
    assert d.sink_uri == ""
    assert d.kafka == KafkaSpec(
        brokers=("kafka-0.kafka.data.svc:9092", "kafka-1.kafka.data.svc:9092"),
        topic="shop_binlog",
        exactly_once=True,
        partition_by="key",
        message_per="row",
        max_messages=256,
        sasl=KafkaSasl("kafka-user", "SCRAM-SHA-512", "username", "password"),
        tls=KafkaTls("kafka-ca", "ca.crt", "client.crt", "client.key"),
    )
    (d,) = parse(raw({"brokers": ["k:9092"]})).drainers
    assert d.kafka == KafkaSpec(brokers=("k:9092",))


def test_every_kafka_problem_is_reported_at_once_on_that_drainer() -> None:
    bad = {
        "brokers": ["k:9092", "no-port", "bad host:1"],
        "topic": "a/b",
        "exactlyOnce": "yes",
        "transactionalId": "t1",
        "partitionBy": "column",
        "messagePer": "batch",
        "maxMessages": 0,
        "maxMessageSize": True,
        "sasl": {"mechanism": "GSSAPI", "passwordKey": "a/b"},
        "tls": {"secretName": "Bad_Name", "certKey": "c.crt"},
        "compression": "lz4",
    }
    with pytest.raises(SpecError) as caught:
        parse_drainer({"kafka": bad}, "k")
    w = "spec.kafka"
    assert caught.value.problems == [
        f"{w}.compression: unknown field",
        f"{w}.brokers: 'no-port' is not a host:port",
        f"{w}.brokers: 'bad host:1' is not a host:port",
        f"{w}.topic: 'a/b' is not a Kafka topic name (letters, digits, '.', '_', '-'; at most 249)",
        f"{w}.exactlyOnce: 'yes' must be true or false",
        f"{w}.transactionalId: only used with exactlyOnce: true",
        f"{w}.partitionBy: 'column' must be one of fixed, table, key",
        f"{w}.messagePer: 'batch' must be one of txn, row",
        f"{w}.maxMessages: 0 must be an integer of at least 1",
        f"{w}.maxMessageSize: True must be an integer of at least 1",
        f"{w}.sasl.secretName: required (a Secret in the cluster's namespace)",
        f"{w}.sasl.mechanism: 'GSSAPI' must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        f"{w}.sasl.passwordKey: 'a/b' is not a Secret key",
        f"{w}.tls.secretName: 'Bad_Name' is not a Secret name",
        f"{w}.tls: certKey and keyKey go together (a client certificate and its key)",
    ]


def test_sink_uri_and_kafka_are_exclusive_and_a_kafka_url_holds_no_password() -> None:
    with pytest.raises(SpecError) as caught:
        parse(raw(sinkURI="kafka://k:9092/t"))
    assert caught.value.problems == [
        "drainers[0]: sinkURI and kafka name the sink twice; give one of them"
    ]
    spec = {"etcd": ETCD, "drainers": [{"name": "k", "sinkURI": "kafka://u:pw@k:9092/t"}]}
    with pytest.raises(SpecError) as caught:
        parse(spec)
    assert caught.value.problems == [
        "drainers[0].sinkURI: a kafka:// URL with a password would be stored in the "
        "ConfigMap; use kafka.sasl.secretName (a Secret) instead"
    ]
    spec = {"etcd": ETCD, "drainers": [{"name": "k", "sinkURI": "kafka://k:9092/t?x=1"}]}
    (d,) = parse(spec).drainers  # a plain kafka:// URL stays a sink URL
    assert d.kafka is None and d.sink_uri == "kafka://k:9092/t?x=1"
    check_all(parse(spec), "c1", "ns1")


def test_the_rendered_toml_loads_with_the_drainers_loader_and_the_pods_env() -> None:
    spec = parse(raw())
    (d,) = spec.drainers
    text = drainer_toml(spec, d, "c1", "ns1")
    assert 'db-type = "kafka"' in text and "sink-uri" not in text
    assert "password" not in text and "kafka-sasl-user" not in text
    check_all(spec, "c1", "ns1")
    # what the pod gives the drainer: env from the Secret, TLS files at the mount
    pod = objects(raw())[("StatefulSet", "c1-drainer-kafka")]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    values = {
        "DRAINER_SYNCER_TO_KAFKA_SASL_USER": "binlog",
        "DRAINER_SYNCER_TO_KAFKA_SASL_PASSWORD": "p@ss/w:rd",
    }
    for name in values:
        assert "value" not in env[name]
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "kafka-user"
    config = check_drainer(text, "kafka", values)
    to = config.syncer.to
    assert (to.kafka_sasl_user, to.kafka_sasl_password) == ("binlog", "p@ss/w:rd")
    assert (to.kafka_ssl_ca, to.kafka_ssl_cert, to.kafka_ssl_key) == (
        f"{KAFKA_TLS_DIR}/ca.crt",
        f"{KAFKA_TLS_DIR}/client.crt",
        f"{KAFKA_TLS_DIR}/client.key",
    )
    assert to.kafka_tls and to.kafka_exactly_once and to.kafka_max_messages == 256
    assert (to.kafka_partition_by, to.kafka_message_per, to.topic_name) == (
        "key",
        "row",
        "shop_binlog",
    )
    url = config.syncer.sink_url("/data")
    assert url.startswith(
        "kafka://binlog:p%40ss%2Fw%3Ard@kafka-0.kafka.data.svc:9092,kafka-1.kafka.data.svc:9092/"
        "shop_binlog?"
    )
    assert "kafka-sasl-mechanism=SCRAM-SHA-512" in url


def test_the_pod_mounts_the_tls_secret_and_the_config_map_holds_no_secret() -> None:
    objs = objects(raw())
    cm = objs[("ConfigMap", "c1-drainer-kafka")]["data"]["drainer.toml"]
    assert "kafka-sasl-mechanism" in cm and "BEGIN" not in cm
    pod = objs[("StatefulSet", "c1-drainer-kafka")]["spec"]["template"]["spec"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == "kafka-tls"]
    assert vol["secret"]["secretName"] == "kafka-ca"
    assert [i["key"] for i in vol["secret"]["items"]] == ["ca.crt", "client.crt", "client.key"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["kafka-tls"] == {
        "name": "kafka-tls",
        "mountPath": KAFKA_TLS_DIR,
        "readOnly": True,
    }
    # without sasl/tls: no env, no volume
    objs = objects(raw({"brokers": ["k:9092"]}))
    pod = objs[("StatefulSet", "c1-drainer-kafka")]["spec"]["template"]["spec"]
    assert all("KAFKA" not in e["name"] for e in pod["containers"][0]["env"])
    assert all(v["name"] != "kafka-tls" for v in pod["volumes"])


def test_config_may_not_set_what_the_kafka_block_owns() -> None:
    config = {
        "syncer": {
            "db-type": "mysql",
            "to": {"kafka-addrs": "x:1", "kafka-sasl-password": "pw", "kafka-version": "2.0.0"},
        }
    }
    spec = parse(raw(config=config))
    with pytest.raises(SpecError) as caught:
        check_all(spec, "c1", "ns1")
    w = "drainers[kafka]"
    assert caught.value.problems == [
        f"{w}.config.syncer.db-type: set by {w}.kafka, remove it",
        f"{w}.config.syncer.to.kafka-addrs: set by {w}.kafka, remove it",
        f"{w}.config.syncer.to.kafka-sasl-password: set by {w}.kafka, remove it",
    ]
    # other [syncer.to] keys stay the user's
    spec = parse(raw(config={"syncer": {"to": {"kafka-version": "2.0.0"}}}))
    (d,) = spec.drainers
    assert (
        check_drainer(drainer_toml(spec, d, "c1", "ns1"), "kafka", {}).syncer.to.kafka_version
        == "2.0.0"
    )
