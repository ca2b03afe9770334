"""Spark-on-Kubernetes against a real kube-apiserver: the chart's Spark service account gets
exactly ``DRIVER_RBAC``, the rendered pod template is a valid Pod for that account, and the
rendered ``spark-submit`` argv (pyspark's own, cluster mode) really creates the driver pod,
authenticated as the Spark service account with a token the API server issued for it.

No kubelet runs: the driver pod stays Pending; what is proven is what reaches the API server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from services.spark.k8s import (
    CONTAINER,
    DRIVER_RBAC,
    STAGING_MOUNT,
    K8sSubmission,
    pod_template,
    submit_args,
)
from tests.support.k8s import CHART, RELEASE, InstalledChart, KubeApiServer
from tests.support.k8s_spark import SPARK_SA, SparkNamespace, as_spark_sa, items, spark_rbac
from tributary.image import IMAGE_UID

pytestmark = [pytest.mark.slow, pytest.mark.etcd]
IMAGE = "registry.local/tributary:1.0"


@pytest.fixture
def spark_ns(
    binlog_chart: InstalledChart, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SparkNamespace]:
    """A fresh namespace holding the chart's Spark objects (``spark.namespaces={ns}``)."""
    kube = binlog_chart.kube
    ns = request.node.name.replace("_", "-")[:50].strip("-").lower()
    kube.kubectl("create", "namespace", ns)
    docs = spark_rbac(kube, RELEASE, f"spark.namespaces={{{ns}}}")
    assert {d["metadata"]["namespace"] for d in docs} == {ns}
    manifest = tmp_path / "spark-rbac.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    kube.kubectl("apply", "-f", str(manifest))
    yield as_spark_sa(kube, ns, tmp_path)


def test_the_chart_role_is_driver_rbac(binlog_chart: InstalledChart) -> None:
    """One source of truth: the rendered and the installed Role both equal DRIVER_RBAC."""
    kube = binlog_chart.kube
    docs = spark_rbac(kube, "rel")
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == [
        ("Role", "rel-spark"),
        ("RoleBinding", "rel-spark"),
        ("ServiceAccount", SPARK_SA),
    ]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["rules"] == DRIVER_RBAC
    installed = kube.get("role", f"{RELEASE}-spark", "-n", binlog_chart.namespace)
    assert installed is not None and installed["rules"] == DRIVER_RBAC
    off = kube.helm("template", "rel", str(CHART), "--set", "spark.enabled=false").stdout
    assert SPARK_SA not in off and "rel-spark" not in off


def can_i(kube: KubeApiServer, who: Path, verb: str, resource: str, ns: str) -> bool:
    name, _, sub = resource.partition("/")
    args = [verb, name, "-n", ns, *([f"--subresource={sub}"] if sub else [])]
    done = kube.kubectl("auth", "can-i", *args, check=False, kubeconfig=who)
    return done.stdout.strip() == "yes"


DENIED = [
    ("get", "secrets"),
    ("list", "secrets"),
    ("create", "pods/exec"),
    ("update", "pods"),
    ("create", "persistentvolumeclaims"),
    ("delete", "persistentvolumeclaims"),
    ("create", "deployments.apps"),
    ("create", "roles.rbac.authorization.k8s.io"),
    ("create", "serviceaccounts/token"),
    ("list", "networkpolicies.networking.k8s.io"),
]


def test_the_spark_account_gets_exactly_the_driver_rules(
    binlog_chart: InstalledChart, tmp_path: Path
) -> None:
    """As the Spark service account of the installed release (its own token): every verb of
    DRIVER_RBAC in the release namespace, none of it elsewhere, no secrets anywhere."""
    kube, ns = binlog_chart.kube, binlog_chart.namespace
    me = as_spark_sa(kube, ns, tmp_path)
    whoami = kube.kubectl("auth", "whoami", "-o", "json", kubeconfig=me.kubeconfig)
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == (
        f"system:serviceaccount:{ns}:{SPARK_SA}"
    )
    allowed = [
        (verb, f"{res}.{group}" if group else res)
        for rule in DRIVER_RBAC
        for group in rule["apiGroups"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    ]
    for verb, resource in allowed:
        assert can_i(kube, me.kubeconfig, verb, resource, ns), (verb, resource)
        assert not can_i(kube, me.kubeconfig, verb, resource, "default"), (verb, resource)
    for verb, resource in DENIED:
        assert not can_i(kube, me.kubeconfig, verb, resource, ns), (verb, resource)


def test_the_pod_template_is_a_valid_pod_for_the_spark_account(
    binlog_chart: InstalledChart, spark_ns: SparkNamespace, tmp_path: Path
) -> None:
    """The template, completed the way Spark completes it (name, image), passes a server-side
    dry-run create as the Spark service account; the same Pod is refused in a namespace the
    chart gave it nothing in."""
    kube = binlog_chart.kube
    sub = K8sSubmission(kube.url, spark_ns.name, IMAGE, staging_claim="staging")
    pod = pod_template(sub)
    pod["metadata"]["name"] = "template-check"
    pod["spec"]["containers"][0]["image"] = IMAGE
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    done = kube.kubectl(
        "create",
        "--dry-run=server",
        "-n",
        spark_ns.name,
        "-f",
        str(path),
        "-o",
        "json",
        kubeconfig=spark_ns.kubeconfig,
    )
    created = json.loads(done.stdout)
    assert created["spec"]["serviceAccountName"] == SPARK_SA
    assert created["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "staging"
    assert kube.get("pod", "template-check", "-n", spark_ns.name) is None  # a dry run
    refused = kube.kubectl(
        "create",
        "--dry-run=server",
        "-n",
        "default",
        "-f",
        str(path),
        check=False,
        kubeconfig=spark_ns.kubeconfig,
    )
    assert refused.returncode != 0 and "forbidden" in refused.stderr


def spark_submit(sub: K8sSubmission, tmp_path: Path, name: str) -> tuple[int, str]:
    """Run the rendered argv with pyspark's own ``bin/spark-submit`` (Java from the machine)."""
    template = tmp_path / f"{name}-template.json"
    template.write_text(json.dumps(pod_template(sub)))
    argv = submit_args(
        sub, "catchup", ["--staging", f"{STAGING_MOUNT}/r1"], str(template), name=name
    )
    assert argv[0] == "spark-submit"
    argv[0] = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    env = {
        **os.environ,
        "KUBECONFIG": str(tmp_path / "no-kubeconfig"),  # only the submission token authenticates
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
    return done.returncode, done.stdout + done.stderr


def test_spark_submit_creates_the_driver_pod_as_the_spark_account(
    binlog_chart: InstalledChart, spark_ns: SparkNamespace, tmp_path: Path
) -> None:
    """The rendered argv, run for real in cluster mode with the Spark service account's token:
    the driver pod appears with the template's account, image, labels, volume and env, next to
    the service, config maps and NetworkPolicy spark-submit applies. The same account submitting
    into a namespace without the chart's Role is refused and creates nothing there."""
    kube, ns = binlog_chart.kube, spark_ns.name
    sub = K8sSubmission(
        kube.url,
        ns,
        IMAGE,
        staging_claim="staging",
        sink_secret="downstream",
        labels={"tributary/drainer": "d1"},
        submit_ca_file=str(kube.ca),
        submit_token_file=str(spark_ns.token_file),
        wait=False,
    )
    code, out = spark_submit(sub, tmp_path, "catchup-r1")
    assert code == 0, out[-4000:]
    pods = items(kube, "pods", "-n", ns, "-l", "spark-role=driver")
    assert len(pods) == 1, pods
    meta, spec = pods[0]["metadata"], pods[0]["spec"]
    assert meta["labels"]["app.kubernetes.io/name"] == "tributary-spark"
    assert meta["labels"]["tributary/drainer"] == "d1"
    assert meta["labels"]["spark-app-name"] == "catchup-r1"
    assert spec["serviceAccountName"] == SPARK_SA
    assert spec["securityContext"]["runAsUser"] == IMAGE_UID
    (c,) = [c for c in spec["containers"] if c["name"] == CONTAINER]
    assert c["image"] == IMAGE
    assert c["args"][-3:] == [
        "local:///opt/tributary/spark-jobs/catchup.py",
        "--staging",
        "/staging/r1",
    ]
    env = {e["name"]: e for e in c["env"]}
    assert "PYTHONPATH" not in env  # the project is installed in the image
    assert env["CATCHUP_SINK_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "downstream",
        "key": "sink-url",
    }
    assert {"name": "staging", "mountPath": STAGING_MOUNT} in c["volumeMounts"]
    claims = [v["persistentVolumeClaim"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [{"claimName": "staging"}]
    app = meta["labels"]["spark-app-selector"]
    assert items(kube, "networkpolicy", "-n", ns)[0]["spec"]["podSelector"]["matchLabels"] == {
        "spark-app-selector": app,
        "spark-role": "executor",
    }
    assert len(items(kube, "services", "-n", ns)) == 1
    maps = {m["metadata"]["name"] for m in items(kube, "configmaps", "-n", ns)}
    assert any(m.endswith("-driver-podspec-conf-map") for m in maps), maps

    other = "spark-no-role"
    kube.kubectl("create", "namespace", other)
    code, out = spark_submit(dataclasses.replace(sub, namespace=other), tmp_path, "catchup-r2")
    assert code != 0
    assert "forbidden" in out.lower()
    assert items(kube, "pods", "-n", other) == []
    assert items(kube, "services", "-n", other) == []
