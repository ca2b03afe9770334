"""The operator against a real kube-apiserver: a drainer whose sink URL holds a password.

The URL lives in a Secret the spec names (``sinkURISecret``): ``kubectl apply`` of a
BinlogCluster with such a drainer, and of a Drainer of its own, creates a StatefulSet whose pod
reads the URL as ``secretKeyRef`` env and a ConfigMap without it; the drainer's settings loader,
given that env as the pod is, writes to the URL. A ``sinkURI`` with a password is refused on its
Drainer, and the password shows in no object the operator wrote, nor in any event.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from binlog_operator.configs import SINK_URI_ENV, check_drainer
from tests.support.etcd import EtcdProcess
from tests.support.k8s import InstalledChart, KubeApiServer, eventually, run_operator
from tests.support.k8s_cluster import FAST, apply, cluster

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(300)]

NS = "operator-sink-secret"
PASSWORD = "s3cret/p@ss"
URL = "mysql://binlog:s3cret%2Fp%40ss@db.data.svc:3306/?consistent=true"


def make_secret(kube: KubeApiServer, root: Path, name: str, key: str) -> None:
    data = {key: base64.b64encode(URL.encode()).decode()}
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}}
    manifest = root / f"{name}.json"
    manifest.write_text(json.dumps({**body, "data": data}))
    kube.kubectl("apply", "-f", str(manifest))


def condition(body: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    found = [c for c in (body or {}).get("status", {}).get("conditions", []) if c["type"] == type_]
    return found[0] if found else None


def check_drainer_objects(kube: KubeApiServer, name: str, ref: dict[str, str]) -> None:
    sts = eventually(lambda: kube.get("statefulset", name, "-n", NS), f"StatefulSet {name}")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env[SINK_URI_ENV] == {"name": SINK_URI_ENV, "valueFrom": {"secretKeyRef": ref}}
    text = kube.get("configmap", name, "-n", NS)["data"]["drainer.toml"]
    assert "sink-uri" not in text and "s3cret" not in text
    secret = kube.get("secret", ref["name"], "-n", NS)
    value = base64.b64decode(secret["data"][ref["key"]]).decode()
    assert check_drainer(text, name, {SINK_URI_ENV: value}).syncer.sink_url("/data") == URL


def test_a_sink_url_with_a_password_comes_from_a_secret_never_a_config_map(
    binlog_chart: InstalledChart, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube = binlog_chart.kube
    kube.kubectl("create", "namespace", NS)
    make_secret(kube, tmp_path, "down-sink", "sink-uri")
    make_secret(kube, tmp_path, "audit-db", "url")
    drainers = [
        {"name": "down", "sinkURISecret": {"name": "down-sink"}},
        {"name": "inline", "sinkURI": URL},
    ]
    own = {
        "apiVersion": "binlog.io/v1alpha1",
        "kind": "Drainer",
        "metadata": {"name": "audit"},
        "spec": {"cluster": "cs", "sinkURISecret": {"name": "audit-db", "key": "url"}},
    }
    with run_operator(binlog_chart, NS, tmp_path, FAST):
        apply(kube, NS, cluster("cs", etcd.endpoint, 1, drainers=drainers))
        apply(kube, NS, own)
        check_drainer_objects(kube, "cs-drainer-down", {"name": "down-sink", "key": "sink-uri"})
        check_drainer_objects(kube, "cs-drainer-audit", {"name": "audit-db", "key": "url"})
        cond = eventually(
            lambda: condition(kube.get("drainer", "cs-drainer-inline", "-n", NS), "Degraded"),
            "Degraded on Drainer cs-drainer-inline",
        )
        assert cond["reason"] == "InvalidSpec"
        assert (
            "spec.sinkURI: a URL with a password would be stored in the ConfigMap"
            in (cond["message"])
        )
        assert kube.get("statefulset", "cs-drainer-inline", "-n", NS) is None
        kinds = "configmaps,statefulsets,services,drainers,pumps,binlogclusters,events"
        written = kube.kubectl("get", kinds, "-n", NS, "-o", "json").stdout
        everything = [i for i in json.loads(written)["items"] if i["kind"] != "BinlogCluster"]
        assert everything and PASSWORD not in json.dumps(everything)
        assert "s3cret" not in json.dumps(everything)
