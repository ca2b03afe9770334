"""The product image, built from the Dockerfile (scripts/k8s-image), in a pod of the one-node
cluster (scripts/k8s-node, ``kube_node``): every console script and the operator start in it."""

from __future__ import annotations

import json
import tomllib

import pytest

from tests.support.k8snode import REPO, KubeNode, wait_pod_phase

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def console_scripts() -> list[str]:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    return sorted(doc["project"]["scripts"])


def test_every_console_script_and_the_operator_start_in_the_image(kube_node: KubeNode) -> None:
    node, ns = kube_node, "image-check"
    node.kubectl("create", "namespace", ns)
    checks = [*console_scripts(), "kopf"]
    script = " ; ".join(
        f'if out=$({s} --help 2>&1); then echo "ok {s}"; else echo "FAIL {s}: $out"; fi'
        for s in checks
    )
    script += ' ; python3 -c "import binlog_operator.handlers" && echo "ok binlog_operator"'
    node.kubectl(
        "run", "check", "-n", ns, f"--image={node.image}", "--image-pull-policy=Never",
        "--restart=Never", "--command", "--", "sh", "-c", script,
    )  # fmt: skip
    pod = wait_pod_phase(node, ns, "check", {"Succeeded", "Failed"}, within=300)
    logs = node.kubectl("logs", "check", "-n", ns).stdout
    assert pod["status"]["phase"] == "Succeeded", logs
    assert "FAIL" not in logs, logs
    for s in [*checks, "binlog_operator"]:
        assert f"ok {s}" in logs.splitlines(), logs


SPARK_PROBE = """
import os
from pyspark.sql import SparkSession
ip = os.environ["POD_IP"]
spark = (
    SparkSession.builder.master("k8s://https://kubernetes.default.svc")
    .config("spark.kubernetes.namespace", os.environ["NAMESPACE"])
    .config("spark.kubernetes.container.image", os.environ["IMAGE"])
    .config("spark.kubernetes.container.image.pullPolicy", "Never")
    .config("spark.kubernetes.executor.podNamePrefix", "probe")
    .config("spark.executor.instances", "2")
    .config("spark.executor.memory", "512m")
    .config("spark.driver.host", ip)
    .config("spark.driver.bindAddress", ip)
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
rows = spark.sparkContext.parallelize(range(1000), 4).map(lambda x: 2 * x).sum()
executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
print("SUM", rows, "EXECUTORS", executors)
spark.stop()
"""


def test_spark_executors_run_as_pods_of_the_image(kube_node: KubeNode) -> None:
    """A client-mode driver in a pod starts executor pods of the image (its entrypoint's
    ``executor`` mode), they run the job's tasks, and they are gone when the driver stops."""
    node, ns = kube_node, "spark-check"
    node.kubectl("create", "namespace", ns)
    node.kubectl(
        "create", "rolebinding", "driver", "-n", ns, "--clusterrole=edit",
        f"--serviceaccount={ns}:default",
    )  # fmt: skip
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NAMESPACE", "value": ns},
        {"name": "IMAGE", "value": node.image},
    ]
    driver = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "driver", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "driver",
                    "image": node.image,
                    "imagePullPolicy": "Never",
                    "env": env,
                    "command": ["python3", "-c", SPARK_PROBE],
                }
            ],
        },
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(driver))
    pod = wait_pod_phase(node, ns, "driver", {"Succeeded", "Failed"}, within=600)
    logs = node.kubectl("logs", "driver", "-n", ns).stdout
    assert pod["status"]["phase"] == "Succeeded", logs[-4000:]
    (line,) = [x for x in logs.splitlines() if x.startswith("SUM ")]
    sum_, executors = int(line.split()[1]), int(line.split()[3])
    assert sum_ == 999000 and executors >= 1, logs[-4000:]
    left = node.get("pods", "-n", ns, "-l", "spark-role=executor") or {"items": []}
    assert not [p for p in left["items"] if not p["metadata"].get("deletionTimestamp")]
