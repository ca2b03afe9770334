"""Day two on the one-node cluster (``kube_node``): a rolling upgrade and a settings change under
a running workload, and a change that cannot be made in place refused.

One BinlogCluster (2 pumps, a drainer into MariaDB on the node's bridge address, a capture
reading that MariaDB's binlog) and a bank workload writing through the pumps' registry records
(the pump client) for the whole of both rolls:

* ``helm upgrade --reuse-values --set image.tag=0.1.0-next`` (the same image under a second tag,
  ``make deps``' ``image-next``): the operator restarts on the new tag, and since the cluster
  names no image of its own, its pods roll to it: ``demo-pump-1``, then ``demo-pump-0`` once
  ``demo-pump-1`` is back (ready, ``online``, caught up), then the drainer, then the capture,
  which registers in the capture cluster again and is its owner; never both pumps out of the
  registry at once; ``Upgrading`` shows the progress (``pumps 1/2, drainers 0/1
  updated``) and ``kubectl get bc`` the versions;
* a drainer setting changed in the BinlogCluster: only the drainer's pod is replaced;
* then the writers stop: no writer failed (retries are fine) and the checker finds the MariaDB
  downstream equal to the workload's SQLite upstream (no acknowledged write lost);
* the drainer's sink type changed from mysql to file while it has a checkpoint: refused
  (``Degraded``/``ChangeRefused``), its pod untouched; put back, the condition clears.

The figures (the roll's duration, the drainer's lag peak, the writers' counters) are printed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.components import component
from tests.support.k8s import CHART, eventually
from tests.support.k8snode import KubeNode
from tests.support.k8snode_cluster import (
    DRAINER_PODS,
    ETCD,
    NODE_IP,
    PUMP_PODS,
    RELEASE,
    SYSTEM_NS,
    binlog_cluster,
    capture_cluster,
    cleaned_up,
    downstream_equal,
    install_chart,
    ready_pods,
    run_pod,
    states,
    table,
)
from tests.support.k8snode_roll import (
    RollWatch,
    condition,
    import_archive,
    pod_uids,
    stamp,
    start_bank,
    stop_bank,
)

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

NEXT = "0.1.0-next"
CAPTURE_PODS = "app.kubernetes.io/component=capture"


@pytest.fixture(scope="session")
def image_next() -> Path:
    """The second archive, looked up with the node's image (before ``kube_node`` starts the
    node), so both are of the same tree."""
    return component("image-next")


def test_rolling_upgrade_and_settings_change_under_a_workload(
    image_next: Path, kube_node: KubeNode, mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    node, ns, name = kube_node, "dayfoo", "demo"
    began = time.monotonic()
    imported = import_archive(image_next)
    db = mariadb_instance("node", host=NODE_IP)
    # a user without a password, so the sink URL (and its type) is in the spec, not a Secret
    db.admin("CREATE USER 'drainer'@'%'; GRANT ALL ON *.* TO 'drainer'@'%'")
    sink = f"mysql://drainer@{NODE_IP}:{db.port}/"
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    with cleaned_up(node, ns):
        install_chart(
            node, "--set", "operator.statusInterval=5", "--set", "operator.rollInterval=2"
        )
        figures = _day_two(node, ns, name, sink, db.dsn(), upstream_dir)
    figures["node_seconds"] = round(time.monotonic() - began)
    figures["import_seconds"] = round(imported)
    print("day-two figures:", json.dumps(figures))


def _day_two(
    node: KubeNode, ns: str, name: str, sink: str, downstream: str, upstream_dir: Path
) -> dict[str, Any]:
    node.kubectl("create", "namespace", ns)
    node.kubectl("create", "secret", "generic", "upstream", "-n", ns,
                 f"--from-literal=upstream={sink}")  # fmt: skip
    cluster = binlog_cluster(
        name,
        ns,
        pumps=2,
        drainers=[{"name": "down", "sinkURI": sink}],
        captures={"replicas": 1, "upstreamSecret": {"name": "upstream", "key": "upstream"}},
    )
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    pumps, drainer = [f"{name}-pump-0", f"{name}-pump-1"], f"{name}-drainer-down-0"
    eventually(
        lambda: (
            ready_pods(node, ns, PUMP_PODS) == pumps
            and ready_pods(node, ns, DRAINER_PODS) == [drainer]
            and ready_pods(node, ns, CAPTURE_PODS) == [f"{name}-capture-0"]
        ),
        "two pump pods, the drainer's and the capture's ready",
        within=420,
        every=3,
    )
    eventually(
        lambda: states(node, "drainers").get(drainer) == "online", "the drainer online", within=120
    )
    watch = RollWatch(node, ns, name)
    watch.until(
        lambda bc: ((bc or {}).get("status") or {}).get("images", {}).get("pumps") == "0.1.0",
        "status.images showing the pumps' version",
        within=60,
    )
    run_pod(
        node,
        ns,
        "tso",
        ["binlog-tso", "--pd-urls", ETCD, "--addr", "0.0.0.0:8240",
         "--advertise-addr", "$(POD_IP):8240"],
    )  # fmt: skip
    start_bank(node, ns, "bank", upstream_dir, seconds=900, seed=1)
    before = RollWatch(node, ns, name)  # the writers under way before anything rolls
    before.until(lambda _: before.samples >= 6, "six samples under the workload", within=60)
    figures = {"drainer_lag_peak_before_seconds": round(before.lag_peak, 1)}
    figures.update(_upgrade(node, ns, name, pumps, drainer))
    figures.update(_drainer_setting(node, ns, name, pumps, drainer))
    stats = stop_bank(node, ns, "bank")
    figures["workload"] = stats
    assert stats["failures"] == 0, stats
    assert stats["commits"] > 200, stats  # 20/s from before the upgrade to after the settings roll
    report = eventually(
        lambda: downstream_equal(upstream_dir / "up.db", downstream),
        "the MariaDB downstream equal to the upstream",
        within=300,
        every=3,
    )
    print("checker:", report.strip().splitlines()[-1] if report.strip() else report)
    _sink_type_change_refused(node, ns, name, sink, drainer)
    return figures


def _upgrade(node: KubeNode, ns: str, name: str, pumps: list[str], drainer: str) -> dict[str, Any]:
    capture = f"{name}-capture-0"
    old = {
        **pod_uids(node, ns, PUMP_PODS),
        **pod_uids(node, ns, DRAINER_PODS),
        **pod_uids(node, ns, CAPTURE_PODS),
    }
    watch = RollWatch(node, ns, name)
    started = time.monotonic()
    node.helm(
        "upgrade", RELEASE, str(CHART), "--namespace", SYSTEM_NS, "--reuse-values",
        "--set", f"image.tag={NEXT}", timeout=300,
    )  # fmt: skip

    def rolled(bc: dict[str, Any] | None) -> Any:
        status = (bc or {}).get("status") or {}
        images = status.get("images") or {}
        done = condition(bc, "Upgrading").get("status") == "False"
        rolled = [images.get(c) for c in ("pumps", "drainers", "captures")]
        return done and rolled == [NEXT] * 3

    watch.until(rolled, "the pumps, the drainer and the capture rolled to the new tag", within=600)
    seconds = time.monotonic() - started
    # one at a time: each pod replaced only after the one before it was back
    pods = {p: node.get("pod", p, "-n", ns) for p in [*pumps, drainer, capture]}
    assert all(pods[p]["metadata"]["uid"] != old[p] for p in pods), "a pod was not replaced"
    for p in pods.values():
        assert p["spec"]["containers"][0]["image"] == f"tributary:{NEXT}"

    def created(p: str) -> float:
        return stamp(pods[p]["metadata"]["creationTimestamp"])

    def ready_since(p: str) -> float:
        ready = next(c for c in pods[p]["status"]["conditions"] if c["type"] == "Ready")
        return stamp(ready["lastTransitionTime"])

    assert ready_since(pumps[1]) <= created(pumps[0]), "pump 0 replaced before pump 1 was back"
    assert ready_since(pumps[0]) <= created(drainer), "the drainer replaced before the pumps"
    assert ready_since(drainer) <= created(capture), "the capture replaced before the drainer"

    def capture_back() -> bool:  # the old one gone from etcd, the new one registered and owner
        captures, owner = capture_cluster(node)
        hosts = [c["address"].split(".")[0] for c in captures.values()]
        return hosts == [capture] and owner in captures

    eventually(capture_back, "the replaced capture registered again, and the owner", within=120)
    assert watch.most_pumps_down <= 1, "two pumps out of the registry at once"
    assert any(
        m.startswith("pumps 1/2, drainers 0/1, captures 0/1 updated") for m in watch.messages
    ), watch.messages
    rows = {r["NAME"]: r for r in table(node, ns, "bc")}
    versions = [rows[name][f"{c} VERSION"] for c in ("PUMP", "DRAINER", "CAPTURE")]
    assert versions == [NEXT] * 3, rows
    operator = node.get("deployment", "binlog-operator", "-n", SYSTEM_NS)
    assert operator["spec"]["template"]["spec"]["containers"][0]["image"] == f"tributary:{NEXT}"
    print("Upgrading said:", watch.messages)
    print("kubectl get bc versions seen:", watch.versions)
    return {
        "roll_seconds": round(seconds),
        "drainer_lag_peak_seconds": round(watch.lag_peak, 1),
        "drainer_lag_peak_while_pumps_roll_seconds": round(watch.pump_phase_lag_peak, 1),
        "pumps_out_at_once": watch.most_pumps_down,
    }


def _drainer_setting(
    node: KubeNode, ns: str, name: str, pumps: list[str], drainer: str
) -> dict[str, Any]:
    """A drainer setting changed: its pod alone is replaced, the pumps keep theirs."""
    before = pod_uids(node, ns, PUMP_PODS)
    drainer_uid = pod_uids(node, ns, DRAINER_PODS)[drainer]
    watch = RollWatch(node, ns, name)
    started = time.monotonic()
    change = [{"op": "add", "path": "/spec/drainers/0/config",
               "value": {"syncer": {"worker-count": 8}}}]  # fmt: skip
    node.kubectl("patch", "bc", name, "-n", ns, "--type=json", "-p", json.dumps(change))

    def replaced(bc: dict[str, Any] | None) -> bool:
        uids = pod_uids(node, ns, DRAINER_PODS)
        back = ready_pods(node, ns, DRAINER_PODS) == [drainer]
        settled = condition(bc, "Upgrading").get("status") == "False"
        return uids.get(drainer, drainer_uid) != drainer_uid and back and settled

    watch.until(replaced, "the drainer's pod replaced", within=300)
    assert pod_uids(node, ns, PUMP_PODS) == before, "a pump pod was replaced"
    eventually(
        lambda: states(node, "drainers").get(drainer) == "online", "the drainer online", within=60
    )
    text = node.get("configmap", f"{name}-drainer-down", "-n", ns)["data"]["drainer.toml"]
    assert "worker-count = 8" in text
    return {
        "drainer_setting_roll_seconds": round(time.monotonic() - started),
        "drainer_setting_lag_peak_seconds": round(watch.lag_peak, 1),
    }


def _sink_type_change_refused(node: KubeNode, ns: str, name: str, sink: str, drainer: str) -> None:
    uid = pod_uids(node, ns, DRAINER_PODS)[drainer]
    to_file = [{"op": "replace", "path": "/spec/drainers/0/sinkURI",
                "value": "file:///var/lib/binlog/drainer/out"}]  # fmt: skip
    node.kubectl("patch", "bc", name, "-n", ns, "--type=json", "-p", json.dumps(to_file))

    def refused() -> Any:
        degraded = condition(node.get("bc", name, "-n", ns), "Degraded")
        return degraded if degraded.get("reason") == "ChangeRefused" else None

    degraded = eventually(refused, "the sink type change refused", within=120)
    assert "cannot change from mysql to file" in degraded["message"], degraded
    sts = node.get("statefulset", f"{name}-drainer-down", "-n", ns)
    assert sts["metadata"]["annotations"]["binlog.io/sink-type"] == "mysql"
    back = [{"op": "replace", "path": "/spec/drainers/0/sinkURI", "value": sink}]
    node.kubectl("patch", "bc", name, "-n", ns, "--type=json", "-p", json.dumps(back))
    eventually(
        lambda: condition(node.get("bc", name, "-n", ns), "Degraded").get("status") == "False",
        "Degraded cleared once the sink is put back",
        within=120,
    )
    assert pod_uids(node, ns, DRAINER_PODS)[drainer] == uid, "the drainer's pod was replaced"
