"""The chart's Spark service account as the Kubernetes tests use it: its rendered RBAC, a real
token for it, and list reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.k8s import CHART, KubeApiServer

SPARK_SA = "tributary-spark"  # values.yaml spark.serviceAccount.name


def spark_rbac(kube: KubeApiServer, release: str, *sets: str) -> list[dict[str, Any]]:
    """The chart's spark-rbac.yaml as ``helm template`` renders it."""
    args = [a for s in sets for a in ("--set", s)]
    out = kube.helm(
        "template",
        release,
        str(CHART),
        "--namespace",
        "binlog-system",
        "--show-only",
        "templates/spark-rbac.yaml",
        *args,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@dataclass
class SparkNamespace:
    name: str
    token_file: Path
    kubeconfig: Path  # authenticates as system:serviceaccount:<name>:tributary-spark


def as_spark_sa(kube: KubeApiServer, ns: str, root: Path) -> SparkNamespace:
    """A real token for the Spark service account (TokenRequest), as a file and a kubeconfig."""
    token = kube.kubectl("create", "token", SPARK_SA, "-n", ns, "--duration=1h").stdout.strip()
    token_file = root / f"token-{ns}"
    token_file.write_text(token)
    return SparkNamespace(ns, token_file, kube.kubeconfig_for(token, f"spark-{ns}"))


def items(kube: KubeApiServer, *args: str) -> list[Any]:
    """``kubectl get`` of a list: its items (kubectl prints nothing for an empty one)."""
    found = kube.get(*args)
    return [] if found is None else list(found["items"])
