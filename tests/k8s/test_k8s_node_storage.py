"""Day two on the one-node cluster (``kube_node``): a pump volume grown under a running
workload, a shrink refused, and a pump at its stop-write floor shown on the BinlogCluster.

The node has no provisioner: the test makes a StorageClass that allows expansion (no
provisioner) and two 1Gi hostPath volumes of that class, so the API server accepts a larger
request and nothing really grows the volumes (hostPath cannot), which is what the status must
then say. One BinlogCluster (2 pumps on those volumes, a drainer into MariaDB) and a bank
workload through the pumps:

* ``spec.pumps.storage.size`` 1Gi -> 2Gi: the operator patches both claims to 2Gi, deletes the
  pump StatefulSet with its pods orphaned and applies it again with a 2Gi claim template: a new
  StatefulSet (another UID) adopts the same pods (UIDs unchanged: no pump restarted, each keeps
  its volume and binlogs, which are still in its hostPath directory); the claims' capacity stays
  1Gi and ``VolumeResizePending`` says so;
* the writers stop: none failed, and the checker finds MariaDB equal to the SQLite upstream;
* 2Gi -> 1Gi is refused (``Degraded``/``ChangeRefused``: a volume cannot shrink), put back the
  condition clears;
* ``stop-write-at-available-space`` set above any disk's free space in ``spec.pumps.config``:
  the pumps roll onto it and ``PumpStorageFull`` names both with ``status.pumpStorage`` showing
  ``stopWrite``; set back, it clears.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.k8s import eventually
from tests.support.k8snode import KubeNode
from tests.support.k8snode_cluster import (
    ETCD,
    NODE_IP,
    PUMP_CONFIG,
    PUMP_PODS,
    binlog_cluster,
    cleaned_up,
    downstream_equal,
    install_chart,
    ready_pods,
    run_pod,
    states,
)
from tests.support.k8snode_roll import RollWatch, condition, pod_uids, start_bank, stop_bank

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

CLASS = "tributary-expandable"
ABOVE_ANY_DISK = {"storage": {"stop-write-at-available-space": 1 << 50}}  # 1 PiB


def _volumes(node: KubeNode, root: Path, count: int) -> list[str]:
    """A StorageClass allowing expansion (no provisioner) and ``count`` 1Gi hostPath volumes."""
    items: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": CLASS},
            "provisioner": "kubernetes.io/no-provisioner",
            "allowVolumeExpansion": True,
            "volumeBindingMode": "Immediate",
        }
    ]
    names = []
    for i in range(count):
        path = root / f"pv{i}"
        path.mkdir()
        path.chmod(0o777)  # pods run as the image's user; hostPath ignores fsGroup
        names.append(f"storage-test-pv{i}")
        items.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": names[-1]},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": CLASS,
                    "hostPath": {"path": str(path), "type": "Directory"},
                },
            }
        )
    node.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                        "items": items}))  # fmt: skip
    return names


def test_grow_a_pump_volume_and_see_the_stop_write_floor(
    kube_node: KubeNode, mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    node, ns, name = kube_node, "daystore", "demo"  # PUMP_PODS selects the "demo" cluster
    began = time.monotonic()
    db = mariadb_instance("node", host=NODE_IP)
    db.admin("CREATE USER 'drainer'@'%'; GRANT ALL ON *.* TO 'drainer'@'%'")
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)
    volumes = tmp_path / "volumes"
    volumes.mkdir()
    pvs = _volumes(node, volumes, 2)
    try:
        with cleaned_up(node, ns):
            install_chart(node, "--set", "operator.statusInterval=5", "--set",
                          "operator.rollInterval=2")  # fmt: skip
            figures = _storage(
                node, ns, name, f"mysql://drainer@{NODE_IP}:{db.port}/", db.dsn(), upstream_dir,
                volumes,
            )  # fmt: skip
    finally:
        node.kubectl("delete", "pv", *pvs, "--ignore-not-found", check=False)
        node.kubectl("delete", "storageclass", CLASS, "--ignore-not-found", check=False)
    figures["node_seconds"] = round(time.monotonic() - began)
    print("storage figures:", json.dumps(figures))


def _storage(
    node: KubeNode, ns: str, name: str, sink: str, downstream: str, upstream: Path, volumes: Path
) -> dict[str, Any]:
    node.kubectl("create", "namespace", ns)
    pumps = [f"{name}-pump-0", f"{name}-pump-1"]
    cluster = binlog_cluster(
        name,
        ns,
        pumps=2,
        pump_spec={"storage": {"size": "1Gi", "storageClassName": CLASS}},
        drainers=[{"name": "down", "sinkURI": sink}],
    )
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    drainer = f"{name}-drainer-down-0"
    eventually(
        lambda: (
            ready_pods(node, ns, PUMP_PODS) == pumps
            and ready_pods(node, ns, "binlog.io/drainer=down") == [drainer]
        ),
        "two pump pods and the drainer's ready",
        within=420,
        every=3,
    )
    eventually(
        lambda: states(node, "drainers").get(drainer) == "online", "the drainer online", within=120
    )
    run_pod(
        node, ns, "tso",
        ["binlog-tso", "--pd-urls", ETCD, "--addr", "0.0.0.0:8240",
         "--advertise-addr", "$(POD_IP):8240"],
    )  # fmt: skip
    start_bank(node, ns, "bank", upstream, seconds=600, seed=3)
    watch = RollWatch(node, ns, name)
    watch.until(lambda _: watch.samples >= 5, "five samples under the workload", within=60)
    figures = _grow(node, ns, name, pumps, volumes)
    watch.until(lambda _: watch.samples >= 20, "the workload after the growth", within=120)
    stats = stop_bank(node, ns, "bank")
    figures["workload"] = stats
    figures["drainer_lag_peak_seconds"] = round(watch.lag_peak, 1)
    assert stats["failures"] == 0, stats
    assert stats["commits"] > 100, stats
    report = eventually(
        lambda: downstream_equal(upstream / "up.db", downstream),
        "the MariaDB downstream equal to the upstream",
        within=300,
        every=3,
    )
    print("checker:", report.strip().splitlines()[-1] if report.strip() else report)
    _shrink_refused(node, ns, name)
    figures.update(_stop_write_floor(node, ns, name, pumps))
    return figures


def _bc(node: KubeNode, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = node.get("bc", name, "-n", ns)
    return found


def _patch(node: KubeNode, ns: str, name: str, ops: list[dict[str, Any]]) -> None:
    node.kubectl("patch", "bc", name, "-n", ns, "--type=json", "-p", json.dumps(ops))


def _grow(node: KubeNode, ns: str, name: str, pumps: list[str], volumes: Path) -> dict[str, Any]:
    sts_before = node.get("statefulset", f"{name}-pump", "-n", ns)["metadata"]["uid"]
    uids = pod_uids(node, ns, PUMP_PODS)
    files_before = {p.name: sorted(f.name for f in p.rglob("*")) for p in volumes.iterdir()}
    assert all(files_before.values()), files_before  # each pump wrote its data there
    started = time.monotonic()
    _patch(node, ns, name, [{"op": "replace", "path": "/spec/pumps/storage/size", "value": "2Gi"}])

    def regrown() -> Any:
        sts = node.get("statefulset", f"{name}-pump", "-n", ns)
        if not sts or sts["metadata"]["uid"] == sts_before:
            return None
        (claim,) = sts["spec"]["volumeClaimTemplates"]
        return sts if claim["spec"]["resources"]["requests"]["storage"] == "2Gi" else None

    eventually(regrown, "the pump StatefulSet applied anew with a 2Gi claim", within=120)
    seconds = time.monotonic() - started
    eventually(lambda: ready_pods(node, ns, PUMP_PODS) == pumps, "both pumps ready", within=120)
    assert pod_uids(node, ns, PUMP_PODS) == uids, "a pump pod was replaced"
    for pod in pumps:
        owner = node.get("pod", pod, "-n", ns)["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "StatefulSet" and owner["uid"] != sts_before, owner
        pvc = node.get("pvc", f"data-{pod}", "-n", ns)
        assert pvc["spec"]["resources"]["requests"]["storage"] == "2Gi", pvc["spec"]
        assert pvc["status"]["capacity"]["storage"] == "1Gi", pvc["status"]  # hostPath
    for pv, files in files_before.items():
        now = {f.name for f in (volumes / pv).rglob("*")}
        assert set(files) <= now, (pv, sorted(set(files) - now))  # every file still there

    def pending(bc: dict[str, Any]) -> Any:
        c = condition(bc, "VolumeResizePending")
        return c if c.get("status") == "True" else None

    resize = eventually(lambda: pending(_bc(node, ns, name)), "VolumeResizePending", within=60)
    assert f"data-{pumps[0]}: requested 2Gi, capacity 1Gi" in resize["message"], resize
    storage = _bc(node, ns, name)["status"]["pumpStorage"]
    assert {(s["pod"], s["requested"], s["capacity"]) for s in storage} == {
        (p, "2Gi", "1Gi") for p in pumps
    }, storage
    assert condition(_bc(node, ns, name), "Degraded").get("status") == "False"
    print("VolumeResizePending said:", resize["message"])
    return {"grow_seconds": round(seconds, 1)}


def _shrink_refused(node: KubeNode, ns: str, name: str) -> None:
    sts = node.get("statefulset", f"{name}-pump", "-n", ns)["metadata"]["uid"]
    _patch(node, ns, name, [{"op": "replace", "path": "/spec/pumps/storage/size", "value": "1Gi"}])

    def refused() -> Any:
        degraded = condition(_bc(node, ns, name), "Degraded")
        return degraded if degraded.get("reason") == "ChangeRefused" else None

    degraded = eventually(refused, "the shrink refused", within=120)
    assert "a volume cannot shrink (data: 2Gi -> 1Gi)" in degraded["message"], degraded
    assert node.get("statefulset", f"{name}-pump", "-n", ns)["metadata"]["uid"] == sts
    _patch(node, ns, name, [{"op": "replace", "path": "/spec/pumps/storage/size", "value": "2Gi"}])
    eventually(
        lambda: condition(_bc(node, ns, name), "Degraded").get("status") == "False",
        "Degraded cleared once 2Gi is put back",
        within=120,
    )


def _stop_write_floor(node: KubeNode, ns: str, name: str, pumps: list[str]) -> dict[str, Any]:
    started = time.monotonic()
    _patch(node, ns, name, [{"op": "replace", "path": "/spec/pumps/config",
                             "value": ABOVE_ANY_DISK}])  # fmt: skip

    def full(bc: dict[str, Any]) -> Any:
        c = condition(bc, "PumpStorageFull")
        return c if c.get("status") == "True" and all(p in c["message"] for p in pumps) else None

    watch = RollWatch(node, ns, name)
    found = watch.until(full, "PumpStorageFull naming both pumps", within=420, every=3)
    seen = time.monotonic() - started
    message = found["message"]
    assert f"<= stop-write-at-available-space {1 << 50}" in message, message
    storage = _bc(node, ns, name)["status"]["pumpStorage"]
    assert all(s.get("stopWrite") is True for s in storage), storage
    print("PumpStorageFull said:", message)
    _patch(node, ns, name, [{"op": "replace", "path": "/spec/pumps/config", "value": PUMP_CONFIG}])

    def cleared(bc: dict[str, Any]) -> bool:
        c = condition(bc, "PumpStorageFull")
        return c.get("status") == "False" and "metrics not read" not in c.get("message", "")

    RollWatch(node, ns, name).until(cleared, "PumpStorageFull cleared", within=420, every=3)
    return {"stop_write_seen_seconds": round(seen), "stop_write_cycle_seconds": round(
        time.monotonic() - started)}  # fmt: skip
