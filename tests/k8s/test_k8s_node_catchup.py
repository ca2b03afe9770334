"""A drainer's Spark catch-up on the one-node cluster whose pods really run (``kube_node``):
``catchup: {kubernetes: true}`` in a BinlogCluster, executor pods of the image that run the job.

The chart is installed with its Spark account in the cluster's namespace; the staging claim is a
ReadWriteMany claim bound to one of the node's hostPath volumes, mounted by the drainer's pod and
by the executors at the same path. A bank workload fills the pump first; the drainer is added
afterwards with ``initial-commit-ts = 0``, so the whole backlog is behind by more than
``lag-threshold`` and its rows go through Spark. The job's driver is the drainer's pod; its
executors read the staged Parquet from the claim and compact it; the driver applies the result
to the drainer's SQLite downstream (one writer). The first job is interrupted by deleting the
drainer's pod: the executor pods go with it and nothing was committed; the restarted drainer
runs the catch-up again to the end, the checker finds the downstream equal to the upstream, and
no executor pod is left.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.k8s import eventually
from tests.support.k8snode import KubeNode
from tests.support.k8snode_cluster import (
    ETCD,
    binlog_cluster,
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

EXECUTORS = "spark-role=executor"
LAG = 15  # seconds: lag-threshold; the drainer is added once the backlog is older than this


# the pumps' volumes are host paths: what the host has free must not refuse the test's writes


def executor_pods(node: KubeNode, ns: str) -> list[dict[str, Any]]:
    pods = node.get("pods", "-n", ns, "-l", EXECUTORS) or {"items": []}
    return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]


def drainer_status(node: KubeNode, ns: str, pod: str) -> dict[str, Any] | None:
    """The drainer's ``GET /status``, from the host over the pod network."""
    got = node.get("pod", pod, "-n", ns)
    ip = (got or {}).get("status", {}).get("podIP")
    if not ip:
        return None
    try:
        with urllib.request.urlopen(f"http://{ip}:8249/status", timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]
    except OSError:
        return None


def test_catchup_executor_pods_move_the_backlog(kube_node: KubeNode, tmp_path: Path) -> None:
    node, ns, name = kube_node, "catchup", "cu"
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    upstream = upstream_dir / "up.db"
    with cleaned_up(node, ns):
        node.kubectl("create", "namespace", ns)
        install_chart(node, "--set", f"spark.namespaces={{{ns}}}")
        _catch_up(node, ns, name, upstream_dir, upstream)


def _catch_up(node: KubeNode, ns: str, name: str, upstream_dir: Path, upstream: Path) -> None:
    staging = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "binlog-staging", "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(staging))
    cluster = binlog_cluster(name, ns, pumps=1)
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    pump = f"{name}-pump-0"
    eventually(
        lambda: states(node, "pumps").get(pump) == "online", "the pump online", within=420, every=3
    )
    run_pod(
        node,
        ns,
        "tso",
        ["binlog-tso", "--pd-urls", ETCD, "--addr", "0.0.0.0:8240",
         "--advertise-addr", "$(POD_IP):8240"],
    )  # fmt: skip
    write_bank(node, ns, "bank", upstream_dir, txns=300, seed=7)
    written = time.monotonic()

    # the drainer comes after the writes: everything it reads is a backlog
    time.sleep(max(0.0, LAG + 5 - (time.monotonic() - written)))
    cluster["spec"]["drainers"] = [
        {
            "name": "lite",
            "sinkURI": "sqlite:///var/lib/binlog/downstream.db",
            "catchup": {
                "kubernetes": True,
                "stagingClaim": "binlog-staging",
                "executors": 2,
                "executorMemory": "512m",
            },
            "config": {
                "initial-commit-ts": 0,
                "syncer": {"catchup": {"lag-threshold": f"{LAG}s"}},
            },
        }
    ]
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    drainer = f"{name}-drainer-lite-0"

    # the first job's executors appear; stopping the drainer (its pod deleted) takes them away
    first = eventually(lambda: executor_pods(node, ns), "executor pods", within=420, every=2)
    owner = {r["name"] for p in first for r in p["metadata"].get("ownerReferences", [])}
    assert owner == {drainer}, first
    ran: set[str] = set()

    def caught_up() -> Any:
        ran.update(
            p["metadata"]["name"]
            for p in executor_pods(node, ns)
            if p.get("status", {}).get("phase") == "Running"
        )
        status = drainer_status(node, ns, drainer)
        catchup = (status or {}).get("CatchUp", {})
        return catchup if catchup.get("ranges_done", 0) >= 1 else None

    # On a fast run the first job may end before the pod is deleted: then it is the proof, and
    # there is no backlog left for a restarted drainer to catch up.
    restarted = caught_up() is None
    if restarted:
        uid = node.get("pod", drainer, "-n", ns)["metadata"]["uid"]
        node.kubectl("delete", "pod", drainer, "-n", ns, "--wait=true", timeout=180)
        eventually(
            lambda: not executor_pods(node, ns), "the executor pods deleted", within=120, every=2
        )

        # the restarted drainer runs the catch-up again; its executors run the job to the end
        eventually(
            lambda: (
                ready_pods(node, ns, "binlog.io/drainer=lite") == [drainer]
                and node.get("pod", drainer, "-n", ns)["metadata"]["uid"] != uid
            ),
            "the drainer's pod back",
            within=300,
            every=3,
        )
        ran.clear()
    try:
        done = eventually(caught_up, "a catch-up range done", within=600, every=2)
    except AssertionError:
        _print_job_logs(node, ns)  # the driver's side: the pods' logs show only the executors'
        raise
    if restarted:  # the second job ran to its end on executors seen running
        assert ran, "no executor pod was seen running"
    assert done["rows_caught_up"] > 0 and done["failures"] == 0, done
    downstream = host_path_of_claim(node, ns, f"data-{drainer}") / "downstream.db"
    eventually(
        lambda: downstream_equal(upstream, downstream),
        "the downstream equal to the upstream",
        within=300,
        every=3,
    )
    eventually(lambda: not executor_pods(node, ns), "no executor pod left", within=120, every=2)
    staged = host_path_of_claim(node, ns, "binlog-staging") / drainer.removesuffix("-0")
    assert (staged / "catchup-job.log").exists(), sorted(staged.iterdir())


def _print_job_logs(node: KubeNode, ns: str) -> None:
    """The catch-up jobs' logs on the staging claim (the drainer's pod logs the job's start
    only; its Spark driver writes there), their tails, for a failure's report."""
    for log in sorted(host_path_of_claim(node, ns, "binlog-staging").glob("*/catchup-job.log*")):
        print(f"===== {log}\n{log.read_text(errors='replace')[-20000:]}")
