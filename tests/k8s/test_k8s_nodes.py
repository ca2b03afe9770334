"""Pump and Drainer resources against a real kube-apiserver, with real pump and drainer
processes on loopback standing in for their pods (no kubelet runs; the operator reaches them
through the address file, as in test_k8s_operator).

``kubectl get pumps,drainers`` shows each node's id, registry state, max commit ts or checkpoint
and lag while rows are written; a scale-down's pumps leave through their resources; deleting a
Pump the cluster still wants is refused; a Drainer created on its own runs, catches up, and its
deletion closes it (offline in the registry, every row it applied still there); an invalid
drainer marks its Drainer, not the cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.demo.procs import free_port_pair
from tests.support.etcd import EtcdProcess
from tests.support.k8s import (
    InstalledChart,
    KubeApiServer,
    eventually,
    eventually_async,
    run_operator,
)
from tests.support.k8s_cluster import FAST, apply, cluster, events, start_drainer
from tests.support.k8s_workload import downstream_ids, table_writer
from tests.support.pump import PumpProcess, start_pump_process
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState

pytestmark = [pytest.mark.slow, pytest.mark.etcd]


@pytest.fixture
def namespace(binlog_chart: InstalledChart, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = request.node.name.replace("_", "-")[:50].strip("-").lower()
    binlog_chart.kube.kubectl("create", "namespace", ns)
    yield ns


def table(kube: KubeApiServer, ns: str, *what: str) -> list[dict[str, str]]:
    """``kubectl get <what>`` as rows of {column: value} (columns are 2+ spaces apart)."""
    lines = kube.kubectl("get", *what, "-n", ns).stdout.strip().splitlines()
    rows: list[dict[str, str]] = []
    header: list[str] = []
    for line in lines:
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == "NAME":
            header = cells
        elif header and line.strip():
            rows.append(dict(zip(header, cells, strict=False)))
    return rows


def resource(kube: KubeApiServer, ns: str, kind: str, name: str) -> dict[str, Any]:
    return kube.get(kind, name, "-n", ns) or {}


def condition(body: dict[str, Any], type_: str) -> dict[str, Any] | None:
    found = [c for c in body.get("status", {}).get("conditions", []) if c["type"] == type_]
    return found[0] if found else None


def start_pumps(tmp_path: Path, etcd: str, cluster_name: str, n: int) -> list[PumpProcess]:
    pumps = []
    for i in range(n):
        (tmp_path / f"p{i}").mkdir()
        pumps.append(
            start_pump_process(
                tmp_path / f"p{i}",
                etcd,
                "--node-id",
                f"{cluster_name}-pump-{i}",
                "--gen-binlog-interval",
                "0.5",
            )
        )
    return pumps


@pytest.mark.timeout(400)
async def test_get_pumps_and_drainers_during_a_workload_and_a_scale_down(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube, ns = binlog_chart.kube, namespace
    pumps = start_pumps(tmp_path, etcd.endpoint, "c7", 2)
    port = free_port_pair()
    db = tmp_path / "down.db"
    drainer = start_drainer(tmp_path, etcd.endpoint, "c7-drainer-down-0", db, port=port)
    addresses = tmp_path / "pods.json"
    nodes = {f"{ns}/c7-pump-{i}": f"127.0.0.1:{p.http_port}" for i, p in enumerate(pumps)}
    nodes[f"{ns}/c7-drainer-down-0"] = f"127.0.0.1:{port + 1}"
    addresses.write_text(json.dumps(nodes))
    env = {**FAST, "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses)}
    try:
        with run_operator(binlog_chart, ns, tmp_path, env):
            down = {"name": "down", "sinkURI": "sqlite:///d.db"}
            apply(kube, ns, cluster("c7", etcd.endpoint, 2, drainers=[down]))
            async with table_writer(etcd.endpoint) as write:
                await write(range(1, 31))
                await eventually_async(
                    lambda: downstream_ids(db) >= set(range(1, 31)), "rows downstream"
                )

                def listed() -> list[dict[str, str]] | None:
                    rows = table(kube, ns, "pumps,drainers")
                    ok = len(rows) == 3 and all(
                        r.get("STATE") == "online" and r.get("LAG", "<none>") != "<none>"
                        for r in rows
                    )
                    return rows if ok else None

                rows = await eventually_async(listed, "pumps and drainers online with a lag")
            by_name = {r["NAME"]: r for r in rows}
            assert set(by_name) == {
                "pump.binlog.io/c7-pump-0",
                "pump.binlog.io/c7-pump-1",
                "drainer.binlog.io/c7-drainer-down",
            }
            pump0 = by_name["pump.binlog.io/c7-pump-0"]
            assert pump0["CLUSTER"] == "c7" and pump0["NODE ID"] == "c7-pump-0"
            assert int(pump0["MAX COMMIT TS"]) > 0 and int(pump0["LAG"]) >= 0
            d = by_name["drainer.binlog.io/c7-drainer-down"]
            assert d["NODE ID"] == "c7-drainer-down-0" and int(d["CHECKPOINT"]) > 0
            headers = kube.kubectl("get", "drainers", "-n", ns).stdout.splitlines()[0].split()
            assert headers == ["NAME", "CLUSTER", "NODE", "ID", "STATE", "CHECKPOINT", "LAG", "AGE"]
            # the status carries the times behind the columns
            status = resource(kube, ns, "pump", "c7-pump-1")["status"]
            assert status["commitTime"].endswith("Z") and status["state"] == "online"
            # kubectl get bc sums them up
            bc = await eventually_async(
                lambda: (t := table(kube, ns, "bc")) and t[0].get("ONLINE") == "2/2" and t,
                "kubectl get bc: 2/2 pumps online",
            )
            assert bc[0]["DRAINERS"] == "1/1" and bc[0]["READY"] == "True"

            # a Pump the cluster still wants is not deleted: refused, its pump keeps running
            kube.kubectl("delete", "pump", "c7-pump-0", "-n", ns, "--wait=false")
            refused = await eventually_async(
                lambda: events(kube, ns, "DeletionRefused"), "DeletionRefused event"
            )
            assert "kubectl scale bc/c7" in refused[0]["message"]
            assert refused[0]["involvedObject"]["kind"] == "Pump"
            pump0_body = resource(kube, ns, "pump", "c7-pump-0")
            assert "deletionTimestamp" in pump0_body["metadata"]
            degraded = await eventually_async(
                lambda: condition(resource(kube, ns, "pump", "c7-pump-0"), "Degraded"),
                "Degraded on the Pump",
            )
            assert degraded["reason"] == "DeletionRefused"
            assert pumps[0].proc.poll() is None

            # a scale-down: the removed pump is closed, goes offline, and its Pump goes
            kube.kubectl("scale", "bc/c7", "-n", ns, "--replicas=1")
            await eventually_async(
                lambda: not resource(kube, ns, "pump", "c7-pump-1"), "Pump c7-pump-1 gone", 120
            )
            async with EtcdKv.connect([etcd.endpoint]) as kv:
                gone = await NodeRegistry(kv).get(NodeKind.PUMP, "c7-pump-1")
                assert gone is not None and gone.state is NodeState.OFFLINE
            assert pumps[1].proc.wait(30) == 0
            assert resource(kube, ns, "pump", "c7-pump-0")  # still there (Terminating)

            # deleting the cluster closes the last pump and the drainer; the resources go
            kube.kubectl("delete", "bc", "c7", "-n", ns, "--wait=false")
            await eventually_async(
                lambda: kube.get("bc", "c7", "-n", ns) is None, "c7 deleted", within=120
            )
            await eventually_async(
                lambda: not table(kube, ns, "pumps,drainers"), "its Pumps and Drainers gone"
            )
            assert pumps[0].proc.wait(30) == 0
            assert drainer.wait(30) == 0
    finally:
        for p in pumps:
            if p.proc.poll() is None:
                p.kill()
        if drainer.poll() is None:
            drainer.terminate()
            drainer.wait(30)


def drainer_resource(name: str, cluster_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "binlog.io/v1alpha1",
        "kind": "Drainer",
        "metadata": {"name": name},
        "spec": {"cluster": cluster_name, **spec},
    }


@pytest.mark.timeout(400)
async def test_a_drainer_of_its_own_catches_up_and_its_deletion_closes_it(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube, ns = binlog_chart.kube, namespace
    (pump,) = start_pumps(tmp_path, etcd.endpoint, "c8", 1)
    port = free_port_pair()
    addresses = tmp_path / "pods.json"
    addresses.write_text(
        json.dumps(
            {
                f"{ns}/c8-pump-0": f"127.0.0.1:{pump.http_port}",
                f"{ns}/c8-drainer-audit-0": f"127.0.0.1:{port + 1}",
            }
        )
    )
    env = {**FAST, "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses)}
    db = tmp_path / "audit.db"
    drainer = None
    try:
        with run_operator(binlog_chart, ns, tmp_path, env):
            apply(kube, ns, cluster("c8", etcd.endpoint, 1))
            async with table_writer(etcd.endpoint) as write:
                await write(range(1, 41))  # a backlog before the drainer exists

                # a team adds its own downstream without editing the cluster
                apply(kube, ns, drainer_resource("audit", "c8", sinkURI="sqlite:///a.db"))
                sts = await eventually_async(
                    lambda: kube.get("statefulset", "c8-drainer-audit", "-n", ns),
                    "the Drainer's StatefulSet",
                )
                (owner,) = sts["metadata"]["ownerReferences"]
                assert owner["kind"] == "Drainer" and owner["name"] == "audit"
                toml = kube.get("configmap", "c8-drainer-audit", "-n", ns)["data"]
                assert f'pd-urls = "{etcd.endpoint}"' in toml["drainer.toml"]
                # its pod, standing in: from the start of the pumps' history
                drainer = start_drainer(
                    tmp_path, etcd.endpoint, "c8-drainer-audit-0", db,
                    "--initial-commit-ts", "0", port=port,
                )  # fmt: skip
                await eventually_async(
                    lambda: downstream_ids(db) >= set(range(1, 41)), "the backlog caught up"
                )
                await write(range(41, 51))
                await eventually_async(
                    lambda: downstream_ids(db) >= set(range(1, 51)), "later rows too"
                )
            audit = await eventually_async(
                lambda: (
                    (b := resource(kube, ns, "drainer", "audit"))
                    and b.get("status", {}).get("state") == "online"
                    and b["status"].get("checkpointTS", 0) > 0
                    and b
                ),
                "Drainer audit online, with a checkpoint",
            )
            assert audit["status"]["nodeId"] == "c8-drainer-audit-0"
            ready = condition(audit, "Degraded")
            assert ready is not None and ready["status"] == "False"
            bc = await eventually_async(
                lambda: (t := table(kube, ns, "bc")) and t[0].get("DRAINERS") == "1/1" and t,
                "the cluster counts the Drainer",
            )
            assert bc[0]["ONLINE"] == "1/1"

            # deleting it closes the drainer first, then its objects and volume claim go
            kube.kubectl("delete", "drainer", "audit", "-n", ns, "--wait=false")
            await eventually_async(
                lambda: not resource(kube, ns, "drainer", "audit"), "Drainer audit gone", 120
            )
            assert drainer.wait(30) == 0
            async with EtcdKv.connect([etcd.endpoint]) as kv:
                status = await NodeRegistry(kv).get(NodeKind.DRAINER, "c8-drainer-audit-0")
                assert status is not None and status.state is NodeState.OFFLINE
            for kind in ("statefulset", "service", "configmap"):
                assert kube.get(kind, "c8-drainer-audit", "-n", ns) is None, kind
            assert events(kube, ns, "DrainerRemoved")
            assert downstream_ids(db) >= set(range(1, 51))  # nothing it applied undone
            assert pump.proc.poll() is None  # the pump was not touched
    finally:
        if pump.proc.poll() is None:
            pump.kill()
        if drainer is not None and drainer.poll() is None:
            drainer.terminate()
            drainer.wait(30)


def test_an_invalid_drainer_marks_its_drainer_not_the_cluster(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube, ns = binlog_chart.kube, namespace
    with run_operator(binlog_chart, ns, tmp_path, FAST):
        drainers = [
            {"name": "good", "sinkURI": "file:///good"},
            {"name": "bad", "sinkURI": "nowhere"},
        ]
        apply(kube, ns, cluster("c9", etcd.endpoint, 1, drainers=drainers))
        bad = eventually(
            lambda: condition(resource(kube, ns, "drainer", "c9-drainer-bad"), "Degraded"),
            "Degraded on Drainer c9-drainer-bad",
        )
        assert bad["status"] == "True" and bad["reason"] == "InvalidSpec"
        assert "spec.sinkURI" in bad["message"]
        body = resource(kube, ns, "drainer", "c9-drainer-bad")
        assert "spec.sinkURI" in body["status"]["lastError"]
        eventually(lambda: kube.get("statefulset", "c9-drainer-good", "-n", ns), "good runs")
        assert kube.get("statefulset", "c9-drainer-bad", "-n", ns) is None
        cond = eventually(
            lambda: condition(resource(kube, ns, "bc", "c9"), "Degraded"), "cluster Degraded"
        )
        assert cond["status"] == "False", cond
        # one of its own: a config key the drainer refuses
        apply(
            kube,
            ns,
            drainer_resource("odd", "c9", sinkURI="file:///odd", config={"addr": "0.0.0.0:1"}),
        )
        odd = eventually(
            lambda: condition(resource(kube, ns, "drainer", "odd"), "Degraded"), "odd marked"
        )
        assert odd["reason"] == "InvalidSpec" and "managed by the operator" in odd["message"]
        warned = eventually(lambda: events(kube, ns, "InvalidSpec"), "InvalidSpec events")
        assert {e["involvedObject"]["kind"] for e in warned} == {"Drainer"}
        # fixed in place: the Drainer runs and is no longer marked
        fixed = [drainers[0], {"name": "bad", "sinkURI": "file:///bad"}]
        apply(kube, ns, cluster("c9", etcd.endpoint, 1, drainers=fixed))
        eventually(lambda: kube.get("statefulset", "c9-drainer-bad", "-n", ns), "bad fixed")
        eventually(
            lambda: (
                (c := condition(resource(kube, ns, "drainer", "c9-drainer-bad"), "Degraded"))
                and c["status"] == "False"
            ),
            "Degraded cleared on the Drainer",
        )
        # a Drainer naming a missing cluster says so
        apply(kube, ns, drainer_resource("lost", "nosuch", sinkURI="file:///lost"))
        lost = eventually(
            lambda: condition(resource(kube, ns, "drainer", "lost"), "Degraded"), "lost marked"
        )
        assert lost["reason"] == "ClusterNotFound"
