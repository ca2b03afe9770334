"""The helm chart against a real kube-apiserver: it lints, renders, validates server-side,
installs, and its RBAC gives the operator exactly what it needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.k8s import (
    CHART,
    OPERATOR_SA,
    InstalledChart,
    KubeApiServer,
)

pytestmark = [pytest.mark.slow, pytest.mark.etcd]
EXAMPLE = CHART / "examples" / "binlogcluster.yaml"


def render(kube: KubeApiServer, *sets: str) -> list[dict[str, Any]]:
    args = [a for s in sets for a in ("--set", s)]
    out = kube.helm(
        "template", "rel", str(CHART), "--namespace", "binlog-system", "--include-crds", *args
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_helm_lint_is_clean(kube: KubeApiServer) -> None:
    done = kube.helm(
        "lint",
        "--strict",
        str(CHART),
        "--set",
        "etcd.enabled=true",
        "--set",
        "example.enabled=true",
    )
    assert "0 chart(s) failed" in done.stdout


def test_template_renders_every_part(kube: KubeApiServer) -> None:
    kinds = sorted(
        (d["kind"], d["metadata"]["name"])
        for d in render(kube, "etcd.enabled=true", "example.enabled=true")
    )
    assert kinds == [
        ("BinlogCluster", "example"),
        ("ClusterRole", "rel-operator"),
        ("ClusterRole", "rel-operator-discovery"),
        ("ClusterRoleBinding", "rel-operator"),
        ("ClusterRoleBinding", "rel-operator-discovery"),
        ("CustomResourceDefinition", "binlogclusters.binlog.io"),
        ("CustomResourceDefinition", "drainers.binlog.io"),
        ("CustomResourceDefinition", "pumps.binlog.io"),
        ("Deployment", "rel-operator"),
        ("Role", "rel-spark"),
        ("RoleBinding", "rel-spark"),
        ("Service", "rel-etcd"),
        ("ServiceAccount", "binlog-operator"),
        ("ServiceAccount", "tributary-spark"),
        ("StatefulSet", "rel-etcd"),
    ]
    namespaced = render(kube, "operator.watchNamespace=apps")
    assert {(d["kind"], d["metadata"]["name"]) for d in namespaced} >= {
        ("Role", "rel-operator"),
        ("RoleBinding", "rel-operator"),
    }
    (deployment,) = [d for d in namespaced if d["kind"] == "Deployment"]
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:4] == ["kopf", "run", "-m", "binlog_operator.handlers"]
    assert "--namespace" in command and "apps" in command


def test_values_outside_the_schema_are_refused(kube: KubeApiServer) -> None:
    for bad in ("operator.replicas=2", "image.pullPolicy=Sometimes", "nosuchkey=1"):
        done = kube.helm("template", "rel", str(CHART), "--set", bad, check=False)
        assert done.returncode != 0, bad
        assert "schema" in done.stderr.lower(), done.stderr


def test_rendered_manifests_validate_on_the_server(
    kube: KubeApiServer, binlog_chart: InstalledChart, tmp_path: Path
) -> None:
    """Server-side dry run of everything the chart renders, plus the example cluster."""
    docs = render(kube, "etcd.enabled=true", "example.enabled=true")
    path = tmp_path / "rendered.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    done = kube.kubectl(
        "apply", "--server-side", "--dry-run=server", "--force-conflicts", "-f", str(path)
    )
    assert "serverside-applied (server dry run)" in done.stdout
    ex = kube.kubectl("apply", "--dry-run=server", "-n", "default", "-f", str(EXAMPLE))
    assert "binlogcluster.binlog.io/demo created (server dry run)" in ex.stdout
    bad = {**yaml.safe_load(EXAMPLE.read_text()), "spec": {"pumps": {"replicas": -1}}}
    path.write_text(json.dumps(bad))
    refused = kube.kubectl(
        "apply", "--dry-run=server", "-n", "default", "-f", str(path), check=False
    )
    assert refused.returncode != 0
    assert "spec.etcd: Required value" in refused.stderr
    assert "spec.pumps.replicas" in refused.stderr


ALLOWED = [
    ("watch", "binlogclusters.binlog.io"),
    ("list", "binlogclusters.binlog.io"),
    ("patch", "binlogclusters.binlog.io"),
    ("patch", "binlogclusters.binlog.io/status"),
    ("update", "binlogclusters.binlog.io/finalizers"),
    ("create", "statefulsets.apps"),
    ("patch", "statefulsets.apps"),
    ("get", "statefulsets.apps"),
    ("create", "services"),
    ("patch", "configmaps"),
    # a drainer removed from the spec: found by label, its objects and volume claim deleted
    ("list", "statefulsets.apps"),
    ("delete", "statefulsets.apps"),
    ("list", "services"),
    ("delete", "services"),
    ("list", "configmaps"),
    ("delete", "configmaps"),
    ("delete", "persistentvolumeclaims"),
    ("get", "persistentvolumeclaims"),  # a changefeed's claimCheckVolumeClaim must exist
    ("patch", "persistentvolumeclaims"),  # a grown pump volume: each claim's request
    ("get", "secrets"),  # spec.tls.secretName: HTTPS to pumps and drainers
    ("create", "events"),
    # Pump and Drainer resources: watched, applied and deleted, their status written; a
    # Drainer owns its drainer's objects
    ("watch", "pumps.binlog.io"),
    ("create", "pumps.binlog.io"),
    ("patch", "pumps.binlog.io"),
    ("delete", "pumps.binlog.io"),
    ("patch", "pumps.binlog.io/status"),
    ("watch", "drainers.binlog.io"),
    ("create", "drainers.binlog.io"),
    ("patch", "drainers.binlog.io"),
    ("delete", "drainers.binlog.io"),
    ("patch", "drainers.binlog.io/status"),
    ("update", "drainers.binlog.io/finalizers"),
    ("list", "customresourcedefinitions.apiextensions.k8s.io"),
    ("watch", "namespaces"),
    # a rolling update reads the pods of the StatefulSets it steps
    ("get", "pods"),
    ("list", "pods"),
]
DENIED = [
    ("watch", "pods"),
    ("delete", "binlogclusters.binlog.io"),
    ("create", "binlogclusters.binlog.io"),
    ("watch", "statefulsets.apps"),
    ("list", "secrets"),
    ("watch", "secrets"),
    ("delete", "secrets"),
    ("list", "persistentvolumeclaims"),
    ("create", "pods"),
    ("delete", "pods"),
    ("update", "customresourcedefinitions.apiextensions.k8s.io"),
    ("get", "customresourcedefinitions.apiextensions.k8s.io"),
    ("delete", "namespaces"),
    ("create", "clusterroles.rbac.authorization.k8s.io"),
    ("create", "pods/exec"),
    ("update", "binlogclusters.binlog.io/status"),
    ("update", "statefulsets.apps/scale"),
    ("update", "pumps.binlog.io"),
    ("update", "pumps.binlog.io/status"),
    ("update", "pumps.binlog.io/finalizers"),
    ("update", "drainers.binlog.io/status"),
    ("deletecollection", "drainers.binlog.io"),
]


def test_the_operator_service_account_gets_exactly_what_it_needs(
    binlog_chart: InstalledChart,
) -> None:
    """Checked as the service account itself (its own token), in any namespace."""
    kube, ns_sa = binlog_chart.kube, OPERATOR_SA
    me = kube.kubectl("auth", "whoami", "-o", "json", kubeconfig=binlog_chart.operator_kubeconfig)
    assert json.loads(me.stdout)["status"]["userInfo"]["username"] == (
        f"system:serviceaccount:{ns_sa[0]}:{ns_sa[1]}"
    )
    for verb, resource in ALLOWED + DENIED:
        name, _, sub = resource.partition("/")
        args = [verb, name, "-n", "some-app", *([f"--subresource={sub}"] if sub else [])]
        done = kube.kubectl(
            "auth", "can-i", *args, check=False, kubeconfig=binlog_chart.operator_kubeconfig
        )
        expected = (verb, resource) in ALLOWED
        assert (done.stdout.strip() == "yes") == expected, (verb, resource, done.stdout)


def test_the_chart_installed_its_objects(binlog_chart: InstalledChart) -> None:
    kube = binlog_chart.kube
    deployment = kube.get("deployment", "binlog-operator", "-n", binlog_chart.namespace)
    assert deployment is not None
    spec = deployment["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == OPERATOR_SA[1]
    (c,) = spec["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    crd = kube.get("crd", "binlogclusters.binlog.io")
    assert crd["spec"]["names"]["shortNames"] == ["bc"]
    for plural, short in (("pumps", "bp"), ("drainers", "bd")):
        crd = kube.get("crd", f"{plural}.binlog.io")
        assert crd["spec"]["names"]["shortNames"] == [short]
        assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}
