"""``spec.pumps.autoscale`` and the HPA path against a real kube-apiserver (no kubelet, no
controllers: the pump pods never come).

* the API server accepts the autoscale object and the operator applies ``pumps.replicas``
  within its bounds: 5 asked, max 2, so the StatefulSet gets 2 and the pilot writes 2 back to
  the spec (an ``AutoscaleBounds`` event); ``Scaling`` shows the step waiting for its pods;
* an invalid autoscale object is refused by the API server's schema;
* a standard ``autoscaling/v2`` HorizontalPodAutoscaler on a Pods metric is accepted with the
  BinlogCluster as its target, ``kubectl get hpa`` names it, and the scale subresource the HPA
  controller reads answers with the pumps' count and their label selector, which selects the
  pump StatefulSet's pods.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.etcd import EtcdProcess
from tests.support.k8s import InstalledChart, eventually, run_operator
from tests.support.k8s_cluster import FAST, apply, cluster, events

pytestmark = [pytest.mark.slow, pytest.mark.etcd]

AUTOSCALE = {"minReplicas": 1, "maxReplicas": 2, "targetBinlogsPerSecond": 50,
             "scaleDownStabilization": "30s"}  # fmt: skip


@pytest.fixture
def namespace(binlog_chart: InstalledChart, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = request.node.name.replace("_", "-")[:50].strip("-").lower()
    binlog_chart.kube.kubectl("create", "namespace", ns)
    yield ns


def _condition(body: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    found = ((body or {}).get("status") or {}).get("conditions") or []
    return next((c for c in found if c.get("type") == type_), {})


def test_autoscale_bounds_and_an_hpa_targeting_the_cluster(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube, ns = binlog_chart.kube, namespace
    env = {**FAST, "BINLOG_OPERATOR_AUTOSCALE_INTERVAL": "1"}
    with run_operator(binlog_chart, ns, tmp_path, env):
        body = cluster("auto", etcd.endpoint, 5)
        body["spec"]["pumps"]["autoscale"] = AUTOSCALE
        apply(kube, ns, body)

        def sts_replicas() -> int | None:
            sts = kube.get("statefulset", "auto-pump", "-n", ns)
            return None if sts is None else int(sts["spec"]["replicas"])

        eventually(lambda: sts_replicas() == 2, "the pump StatefulSet within the bounds")
        eventually(
            lambda: kube.get("bc", "auto", "-n", ns)["spec"]["pumps"]["replicas"] == 2,
            "pumps.replicas written back within the bounds",
        )
        (event,) = eventually(lambda: events(kube, ns, "AutoscaleBounds"), "a bounds event")
        assert "5 pumps are outside 1..2: 2" in event["message"], event
        # the step as the pilot wrote it, then as it waits for its pods (no kubelet runs)
        scaling = eventually(
            lambda: (
                c
                if "0 pods, 0 ready"
                in (c := _condition(kube.get("bc", "auto", "-n", ns), "Scaling")).get("message", "")
                else None
            ),
            "the Scaling condition waiting for the pods",
        )
        assert scaling["status"] == "True" and scaling["reason"] == "ScalingUp", scaling
        status = kube.get("bc", "auto", "-n", ns)["status"]["autoscale"]
        assert status["desiredReplicas"] == 2 and status["reason"] == "Bounds", status

        bad = cluster("bad", etcd.endpoint, 1)
        bad["spec"]["pumps"]["autoscale"] = {"maxReplicas": 0, "targetBinlogsPerSecond": -1}
        refused = kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(bad), check=False)
        assert refused.returncode != 0
        assert "maxReplicas" in refused.stderr and "targetBinlogsPerSecond" in refused.stderr

        _hpa(kube, ns)


def _hpa(kube: Any, ns: str) -> None:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "pumps", "namespace": ns},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "binlog.io/v1alpha1", "kind": "BinlogCluster", "name": "auto",
            },
            "minReplicas": 1,
            "maxReplicas": 2,
            "metrics": [{
                "type": "Pods",
                "pods": {
                    "metric": {"name": "binlog_pump_binlogs_per_second"},
                    "target": {"type": "AverageValue", "averageValue": "2k"},
                },
            }],
        },
    }  # fmt: skip
    apply(kube, ns, hpa)
    out = kube.kubectl("get", "hpa", "pumps", "-n", ns).stdout
    assert "BinlogCluster/auto" in out, out
    scale = json.loads(
        kube.kubectl(
            "get", "--raw", f"/apis/binlog.io/v1alpha1/namespaces/{ns}/binlogclusters/auto/scale"
        ).stdout
    )
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2, scale
    selector = scale["status"]["selector"]
    assert selector == "app.kubernetes.io/instance=auto,app.kubernetes.io/component=pump", scale
    sts = kube.get("statefulset", "auto-pump", "-n", ns)
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in (p.split("=") for p in selector.split(","))), labels
