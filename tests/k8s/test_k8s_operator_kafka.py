"""The operator against a real kube-apiserver: a drainer whose sink is Kafka.

``kubectl apply`` of a BinlogCluster with a ``drainers[].kafka`` entry (brokers, topic, the Kafka
options, SASL credentials and TLS files in Secrets), and of a Drainer of its own with a Kafka
sink, creates each drainer's StatefulSet with the SASL user and password as ``secretKeyRef`` env
and the TLS Secret mounted, and a ConfigMap that holds no secret; the drainer's own settings
loader accepts that ConfigMap with the values the Secret gives the pod. A bad ``kafka`` block is
reported on its Drainer, every problem listed, and nothing of it is applied.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from binlog_operator.configs import check_drainer
from binlog_operator.kafkasink import KAFKA_TLS_DIR, SASL_PASSWORD_ENV, SASL_USER_ENV
from tests.support.etcd import EtcdProcess
from tests.support.k8s import InstalledChart, KubeApiServer, eventually, run_operator
from tests.support.k8s_cluster import FAST, apply, cluster

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(300)]

NS = "operator-kafka"
PASSWORD = "s3cret/p@ss"


def secrets(kube: KubeApiServer, root: Path) -> None:
    def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        meta = {"name": name, "namespace": NS}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": encoded}

    items = [
        secret("kafka-user", {"username": "binlog", "password": PASSWORD}),
        secret("kafka-tls", {"ca.crt": "CA PEM", "client.crt": "CERT", "client.key": "KEY"}),
    ]
    manifest = root / "secrets.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    kube.kubectl("apply", "-f", str(manifest))


def secret_value(kube: KubeApiServer, ref: dict[str, str]) -> str:
    body = kube.get("secret", ref["name"], "-n", NS)
    return base64.b64decode(body["data"][ref["key"]]).decode()


def condition(body: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    found = [c for c in (body or {}).get("status", {}).get("conditions", []) if c["type"] == type_]
    return found[0] if found else None


def check_drainer_objects(kube: KubeApiServer, name: str, sasl_secret: str) -> None:
    """The StatefulSet's env and volumes, and its ConfigMap loaded as the pod loads it."""
    sts = eventually(lambda: kube.get("statefulset", name, "-n", NS), f"StatefulSet {name}")
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    refs = {n: env[n]["valueFrom"]["secretKeyRef"] for n in (SASL_USER_ENV, SASL_PASSWORD_ENV)}
    assert refs == {
        SASL_USER_ENV: {"name": sasl_secret, "key": "username"},
        SASL_PASSWORD_ENV: {"name": sasl_secret, "key": "password"},
    }
    cm = kube.get("configmap", name, "-n", NS)
    text = cm["data"]["drainer.toml"]
    assert PASSWORD not in text and "kafka-sasl-user" not in text
    values = {n: secret_value(kube, ref) for n, ref in refs.items()}
    config = check_drainer(text, name, values)
    assert config.syncer.to.kafka_sasl_password == PASSWORD
    assert config.syncer.sink_url("/data").startswith("kafka://binlog:s3cret%2Fp%40ss@")


def test_kafka_drainers_get_their_secrets_as_env_and_mounts(
    binlog_chart: InstalledChart, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube = binlog_chart.kube
    kube.kubectl("create", "namespace", NS)
    secrets(kube, tmp_path)
    kafka = {
        "brokers": ["kafka-0.kafka.data.svc:9092", "kafka-1.kafka.data.svc:9092"],
        "topic": "shop_binlog",
        "exactlyOnce": True,
        "partitionBy": "table",
        "messagePer": "row",
        "sasl": {"secretName": "kafka-user", "mechanism": "SCRAM-SHA-256"},
        "tls": {"secretName": "kafka-tls", "certKey": "client.crt", "keyKey": "client.key"},
    }
    bad = {"brokers": ["no-port"], "topic": "a/b", "transactionalId": "t"}
    drainers = [{"name": "kafka", "kafka": kafka}, {"name": "bad", "kafka": bad}]
    own = {
        "apiVersion": "binlog.io/v1alpha1",
        "kind": "Drainer",
        "metadata": {"name": "audit"},
        "spec": {
            "cluster": "ck",
            "kafka": {"brokers": ["k:9092"], "sasl": {"secretName": "kafka-user"}},
        },
    }
    with run_operator(binlog_chart, NS, tmp_path, FAST):
        apply(kube, NS, cluster("ck", etcd.endpoint, 1, drainers=drainers))
        apply(kube, NS, own)
        check_drainer_objects(kube, "ck-drainer-kafka", "kafka-user")
        sts = kube.get("statefulset", "ck-drainer-kafka", "-n", NS)
        pod = sts["spec"]["template"]["spec"]
        (vol,) = [v for v in pod["volumes"] if v["name"] == "kafka-tls"]
        assert vol["secret"]["secretName"] == "kafka-tls"
        assert [i["key"] for i in vol["secret"]["items"]] == ["ca.crt", "client.crt", "client.key"]
        mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["kafka-tls"] == KAFKA_TLS_DIR
        text = kube.get("configmap", "ck-drainer-kafka", "-n", NS)["data"]["drainer.toml"]
        for line in (
            'db-type = "kafka"',
            'kafka-addrs = "kafka-0.kafka.data.svc:9092,kafka-1.kafka.data.svc:9092"',
            'topic-name = "shop_binlog"',
            "kafka-exactly-once = true",
            'kafka-partition-by = "table"',
            'kafka-message-per = "row"',
            'kafka-sasl-mechanism = "SCRAM-SHA-256"',
            f'kafka-ssl-ca = "{KAFKA_TLS_DIR}/ca.crt"',
        ):
            assert line in text
        # a Drainer of its own with a Kafka sink runs the same way
        check_drainer_objects(kube, "ck-drainer-audit", "kafka-user")
        # the bad entry: every problem on its Drainer, nothing of it applied
        cond = eventually(
            lambda: condition(kube.get("drainer", "ck-drainer-bad", "-n", NS), "Degraded"),
            "Degraded on Drainer ck-drainer-bad",
        )
        assert cond["reason"] == "InvalidSpec"
        for problem in (
            "spec.kafka.brokers: 'no-port' is not a host:port",
            "spec.kafka.topic: 'a/b' is not a Kafka topic name",
            "spec.kafka.transactionalId: only used with exactlyOnce: true",
        ):
            assert problem in cond["message"]
        assert kube.get("statefulset", "ck-drainer-bad", "-n", NS) is None
