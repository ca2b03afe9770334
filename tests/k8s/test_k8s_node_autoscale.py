"""The pumps' auto pilot on the one-node cluster (``kube_node``), under a bank workload written
through the pumps (the pump client) and drained into MariaDB:

* a BinlogCluster with ``pumps.autoscale`` {min 1, max 2, 10 binlogs/s per pump, stabilization
  45 s} starts with one pump (the bounds and the target leave the writers' rate a wide margin on
  a loaded machine: a burst of the bank catching up once asked for 3 pumps with max 3); the
  operator reads each pump's ``/metrics`` every 3 s (rate over 10 s);
* step up: the bank at 18 transactions/s (up to 36 binlogs/s, a prewrite and a commit each)
  makes the operator scale to 2 (``AutoscaleUp``, with the measured rate), and ``demo-pump-1``
  joins (ready, ``online``);
* step down: the bank replaced by one at 2/s (about 4 binlogs/s, one pump would do); no pump is
  removed before the 45 s window has passed since the drop, then ``AutoscaleDown`` takes
  ``demo-pump-1`` offline (closed through its API, ``offline`` in the registry) before its pod
  goes, while the writers go on;
* then the writers stop: none failed (retries are fine) and the checker finds the MariaDB
  downstream equal to the SQLite upstream (nothing lost);
* an ``autoscaling/v2`` HorizontalPodAutoscaler on a Pods metric targeting the BinlogCluster:
  the node's HPA controller reads the scale subresource (``AbleToScale``/``SucceededGetScale``;
  no metrics adapter here, so it cannot compute a count and changes nothing).

The scaling steps' times (decided, applied) and the writers' counters are printed.
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
    DRAINER_PODS,
    ETCD,
    NODE_IP,
    PUMP_PODS,
    binlog_cluster,
    cleaned_up,
    downstream_equal,
    install_chart,
    ready_pods,
    run_pod,
    states,
)
from tests.support.k8snode_roll import condition, stamp, start_bank, stop_bank

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

STABILIZATION = 45
AUTOSCALE = {"minReplicas": 1, "maxReplicas": 2, "targetBinlogsPerSecond": 10,
             "scaleDownStabilization": f"{STABILIZATION}s"}  # fmt: skip


def test_pumps_scale_up_and_down_with_the_write_rate(
    kube_node: KubeNode, mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    node, ns, name = kube_node, "autoscale", "demo"
    began = time.monotonic()
    db = mariadb_instance("node", host=NODE_IP)
    db.admin("CREATE USER 'drainer'@'%'; GRANT ALL ON *.* TO 'drainer'@'%'")
    sink = f"mysql://drainer@{NODE_IP}:{db.port}/"
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    with cleaned_up(node, ns):
        install_chart(
            node, "--set", "operator.statusInterval=5", "--set", "operator.autoscaleInterval=3",
            "--set", "operator.autoscaleWindow=10",
        )  # fmt: skip
        figures = _autoscale(node, ns, name, sink, db.dsn(), upstream_dir)
    figures["node_seconds"] = round(time.monotonic() - began)
    print("autoscale figures:", json.dumps(figures))


def _autoscale(
    node: KubeNode, ns: str, name: str, sink: str, downstream: str, upstream_dir: Path
) -> dict[str, Any]:
    node.kubectl("create", "namespace", ns)
    cluster = binlog_cluster(
        name,
        ns,
        pumps=1,
        pump_spec={"autoscale": AUTOSCALE},
        drainers=[{"name": "down", "sinkURI": sink}],
    )
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    pump0, pump1, drainer = f"{name}-pump-0", f"{name}-pump-1", f"{name}-drainer-down-0"
    eventually(
        lambda: (
            ready_pods(node, ns, PUMP_PODS) == [pump0]
            and ready_pods(node, ns, DRAINER_PODS) == [drainer]
        ),
        "the pump's and the drainer's pods ready",
        within=420,
        every=3,
    )
    eventually(
        lambda: states(node, "drainers").get(drainer) == "online", "the drainer online", within=120
    )
    run_pod(
        node,
        ns,
        "tso",
        ["binlog-tso", "--pd-urls", ETCD, "--addr", "0.0.0.0:8240",
         "--advertise-addr", "$(POD_IP):8240"],
    )  # fmt: skip
    t0 = time.time()
    steps: dict[str, float] = {}
    start_bank(node, ns, "bank", upstream_dir, seconds=600, seed=1, rate=18)
    steps["workload_up"] = time.time()
    eventually(lambda: _asked(node, ns, name) == 2, "the pilot asking for 2 pumps", within=180)
    eventually(
        lambda: (
            ready_pods(node, ns, PUMP_PODS) == [pump0, pump1]
            and states(node, "pumps").get(pump1) == "online"
            and condition(node.get("bc", name, "-n", ns), "Scaling").get("status") == "False"
        ),
        "demo-pump-1 ready and online",
        within=300,
        every=2,
    )
    steps["up_done"] = time.time()
    up = _events(node, ns, "AutoscaleUp")
    assert up and "pumps 1 -> 2" in up[0]["message"] and "binlogs/s per pump" in up[0]["message"]
    time.sleep(15)  # writes go to both pumps for a while
    steps["workload_stopping"] = time.time()
    fast = stop_bank(node, ns, "bank")
    start_bank(node, ns, "bank-low", upstream_dir, seconds=600, seed=2, rate=2)
    steps["workload_down"] = time.time()
    eventually(
        lambda: _asked(node, ns, name) == 1, "the pilot asking for 1 pump", within=240, every=2
    )
    steps["down_decided"] = time.time()
    eventually(
        lambda: (
            ready_pods(node, ns, PUMP_PODS) == [pump0]
            and condition(node.get("bc", name, "-n", ns), "Scaling").get("status") == "False"
        ),
        "demo-pump-1 gone",
        within=300,
        every=2,
    )
    steps["down_done"] = time.time()
    assert states(node, "pumps").get(pump1) == "offline", states(node, "pumps")
    assert states(node, "pumps").get(pump0) == "online"
    sts = node.get("statefulset", f"{name}-pump", "-n", ns)
    assert sts["spec"]["replicas"] == 1
    down = _events(node, ns, "AutoscaleDown")
    assert down and "pumps 2 -> 1" in down[0]["message"], down
    assert f"for the last {STABILIZATION} s" in down[0]["message"]
    # no pump taken before the window: the rate (over 10 s) stayed high a little past the stop,
    # and the pilot looks every 3 s (events have whole seconds)
    down_at = _when(down[0])
    assert down_at >= int(steps["workload_stopping"]) + STABILIZATION - 4, (down_at, steps)
    time.sleep(10)  # the writers go on with one pump
    slow = stop_bank(node, ns, "bank-low")
    assert fast["failures"] == 0 and slow["failures"] == 0, (fast, slow)
    report = eventually(
        lambda: downstream_equal(upstream_dir / "up.db", downstream),
        "the MariaDB downstream equal to the upstream",
        within=300,
        every=3,
    )
    print("checker:", report.strip().splitlines()[-1] if report.strip() else report)
    events = [
        (e["reason"], _when(e) - int(t0), e["message"])
        for r in ("AutoscaleUp", "AutoscaleDown", "Scaled")
        for e in _events(node, ns, r)
    ]
    for reason, at, message in sorted(events, key=lambda e: e[1]):
        print(f"event +{at:4d} s {reason}: {message}")
    _hpa(node, ns, name)
    return {
        "steps_seconds_after_start": {k: round(v - t0, 1) for k, v in steps.items()},
        "scale_up_seconds": round(steps["up_done"] - steps["workload_up"]),
        "scale_down_seconds_after_drop": round(steps["down_done"] - steps["workload_down"]),
        "workload_fast": fast,
        "workload_slow": slow,
        "status_autoscale": node.get("bc", name, "-n", ns)["status"].get("autoscale"),
    }


def _asked(node: KubeNode, ns: str, name: str) -> int:
    return int(node.get("bc", name, "-n", ns)["spec"]["pumps"]["replicas"])


def _events(node: KubeNode, ns: str, reason: str) -> list[dict[str, Any]]:
    found = node.get("events", "-n", ns, "--field-selector", f"reason={reason}") or {}
    return sorted(found.get("items") or [], key=_when)


def _when(event: dict[str, Any]) -> int:
    text = event.get("firstTimestamp") or event.get("eventTime") or event["lastTimestamp"]
    return int(stamp(str(text)))


def _hpa(node: KubeNode, ns: str, name: str) -> None:
    """An HPA on a Pods metric targeting the cluster: the controller reads its scale."""
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "pumps", "namespace": ns},
        "spec": {
            "scaleTargetRef": {"apiVersion": "binlog.io/v1alpha1", "kind": "BinlogCluster",
                               "name": name},
            "minReplicas": 1,
            "maxReplicas": 3,
            "metrics": [{"type": "Pods", "pods": {
                "metric": {"name": "binlog_pump_binlogs_per_second"},
                "target": {"type": "AverageValue", "averageValue": "20"}}}],
        },
    }  # fmt: skip
    node.kubectl("apply", "-f", "-", input=json.dumps(hpa))

    def got_scale() -> Any:
        found = node.get("hpa", "pumps", "-n", ns) or {}
        able: dict[str, Any] = next(
            (c for c in (found.get("status") or {}).get("conditions") or []
             if c["type"] == "AbleToScale"), {},
        )  # fmt: skip
        return found if able.get("reason") == "SucceededGetScale" else None

    found = eventually(got_scale, "the HPA controller reading the scale", within=120, every=3)
    print("hpa conditions:", json.dumps(found["status"]["conditions"]))
    print(node.kubectl("get", "hpa", "-n", ns).stdout)
    assert found["status"].get("currentReplicas") == 1, found["status"]
    node.kubectl("delete", "hpa", "pumps", "-n", ns)
