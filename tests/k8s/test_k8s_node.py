"""The product image, built from the Dockerfile (scripts/k8s-image), in a pod of the one-node
cluster (scripts/k8s-node, ``kube_node``): every console script and the operator start in it."""

from __future__ import annotations

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
