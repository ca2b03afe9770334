"""The operator against a real kube-apiserver: a drainer whose catch-up runs on Kubernetes, and
the drainers of a deleted BinlogCluster closed before it goes.

``kubectl apply`` of a BinlogCluster with ``drainers[].catchup.kubernetes`` makes the drainer's
StatefulSet run as the chart's Spark service account (allowed to create executor pods in that
namespace), with the staging claim mounted and its pod name, namespace and IP from the downward
API, and a ConfigMap whose drainer.toml the drainer's own settings loader accepts. Deleting the
cluster closes a real drainer process through its HTTP API (it records ``offline`` and exits),
while a drainer that cannot be reached holds the deletion only for the configured budget and is
named in a Warning event. No kubelet runs: the drainer process on loopback stands in for its pod.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from binlog_operator.configs import check_drainer
from services.demo.procs import free_port_pair
from tests.support.etcd import EtcdProcess
from tests.support.k8s import RELEASE, InstalledChart, KubeApiServer, eventually_async, run_operator
from tests.support.k8s_cluster import FAST, apply, cluster, etcdctl_put, events, start_drainer
from tests.support.k8s_spark import SPARK_SA, spark_rbac
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(300)]

NS = "operator-catchup"
CLAIM = "staging"
CLOSE_BUDGET = 15  # seconds the deletion tries to close the unreachable drainer


def prepare_namespace(kube: KubeApiServer, root: Path) -> None:
    """The namespace with the chart's Spark account and Role (spark.namespaces) and an RWX
    claim for the staged ranges, as a user would set them up."""
    kube.kubectl("create", "namespace", NS)
    docs = spark_rbac(kube, RELEASE, f"spark.namespaces={{{NS}}}")
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM, "namespace": NS},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    manifest = root / "prepare.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*docs, claim]}))
    kube.kubectl("apply", "-f", str(manifest))


async def test_a_kubernetes_catch_up_drainer_and_closing_drainers_on_deletion(
    binlog_chart: InstalledChart, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube = binlog_chart.kube
    await asyncio.to_thread(prepare_namespace, kube, tmp_path)
    # the "cu" drainer runs for real on loopback; "lost" is registered online but unreachable
    port = free_port_pair()
    cu, lost = "c7-drainer-cu-0", "c7-drainer-lost-0"
    drainer = start_drainer(
        tmp_path, etcd.endpoint, cu, tmp_path / "cu.db", "--initial-commit-ts", "0", port=port
    )
    addresses = tmp_path / "pods.json"
    addresses.write_text(json.dumps({f"{NS}/{cu}": f"127.0.0.1:{port + 1}"}))
    env = {
        **FAST,
        "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses),
        "BINLOG_OPERATOR_DRAINER_CLOSE_TIMEOUT": str(CLOSE_BUDGET),
    }
    catchup = {"kubernetes": True, "stagingClaim": CLAIM, "executors": 3}
    drainers = [
        {"name": "cu", "sinkURI": "sqlite:///var/lib/binlog/drainer/cu.db", "catchup": catchup},
        {"name": "lost", "sinkURI": "file:///var/lib/binlog/drainer/out"},
    ]
    try:
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            registry = NodeRegistry(kv)

            async def state(node: str) -> NodeState | None:
                s = await registry.get(NodeKind.DRAINER, node)
                return None if s is None else s.state

            with run_operator(binlog_chart, NS, tmp_path, env):
                await asyncio.to_thread(
                    apply, kube, NS, cluster("c7", etcd.endpoint, 0, drainers=drainers)
                )
                sts = await eventually_async(
                    lambda: kube.get("statefulset", "c7-drainer-cu", "-n", NS), "drainer cu"
                )
                pod = sts["spec"]["template"]["spec"]
                assert pod["serviceAccountName"] == SPARK_SA
                assert {"name": "staging", "persistentVolumeClaim": {"claimName": CLAIM}} in pod[
                    "volumes"
                ]
                (c,) = pod["containers"]
                assert {"name": "staging", "mountPath": "/staging"} in c["volumeMounts"]
                fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
                assert fields == {
                    "POD_NAME": "metadata.name",
                    "NAMESPACE": "metadata.namespace",
                    "POD_IP": "status.podIP",
                }
                # the account the drainer's pod runs as may create its executor pods
                can = kube.kubectl(
                    "auth", "can-i", "create", "pods", "-n", NS,
                    f"--as=system:serviceaccount:{NS}:{SPARK_SA}",
                )  # fmt: skip
                assert can.stdout.strip() == "yes"
                # the ConfigMap's TOML is one the drainer accepts, catching up on Kubernetes
                toml = kube.get("configmap", "c7-drainer-cu", "-n", NS)["data"]["drainer.toml"]
                cfg = check_drainer(toml, "cu").syncer.catchup
                assert cfg.enabled and cfg.kubernetes.enabled
                assert cfg.staging_dir == "/staging/c7-drainer-cu/catchup"
                k8s = cfg.kubernetes
                assert (k8s.namespace, k8s.image, k8s.service_account) == (
                    NS,
                    "tributary:test",
                    SPARK_SA,
                )
                assert (k8s.staging_claim, k8s.staging_mount, k8s.executors) == (
                    CLAIM,
                    "/staging",
                    3,
                )
                plain = kube.get("statefulset", "c7-drainer-lost", "-n", NS)
                assert "serviceAccountName" not in plain["spec"]["template"]["spec"]

                # both drainers online in the registry
                lost_status = NodeStatus(lost, "127.0.0.1:1", NodeState.ONLINE)
                await asyncio.to_thread(
                    etcdctl_put,
                    etcd,
                    f"/tidb-binlog/v1/drainers/{lost}",
                    lost_status.to_json().decode(),
                )
                await eventually_async_state(state, cu, NodeState.ONLINE)

                # deleting the cluster closes the reachable drainer; the other one holds the
                # deletion only for the budget, then is named in a Warning event
                kube.kubectl("delete", "bc", "c7", "-n", NS, "--wait=false")
                await eventually_async(
                    lambda: kube.get("bc", "c7", "-n", NS) is None, "c7 deleted", within=120
                )
                assert await state(cu) is NodeState.OFFLINE
                assert drainer.wait(30) == 0
                assert await state(lost) is NodeState.ONLINE  # left as it was, and said so
                # the deletion handler may run more than once (kopf retries it after an error,
                # such as a failed apiserver call after the drainers were closed), and each
                # run reports: one event or more, all alike
                closed_events = events(kube, NS, "DrainersClosed")
                assert closed_events
                for closed in closed_events:
                    assert closed["type"] == "Normal" and "c7-drainer-cu" in closed["message"]
                left_events = events(kube, NS, "DrainersLeftOnline")
                assert left_events
                for left in left_events:
                    assert left["type"] == "Warning"
                    assert f"{lost}: no address for {NS}/{lost}" in left["message"]
                    assert "update-drainer" in left["message"]
                    assert "c7-drainer-cu-0" not in left["message"]
    finally:
        if drainer.poll() is None:
            drainer.terminate()
            drainer.wait(30)


async def eventually_async_state(
    state: Callable[[str], Awaitable[NodeState | None]],
    node: str,
    want: NodeState,
    within: float = 60.0,
) -> None:
    """Poll the registry (async) until ``node`` is in state ``want``."""
    deadline = asyncio.get_running_loop().time() + within
    while (now := await state(node)) is not want:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{node} not {want.value} within {within:.0f} s (is {now})")
        await asyncio.sleep(0.3)
