"""The operator against a real kube-apiserver, acting as the chart's service account.

``kubectl apply`` of a BinlogCluster creates its objects, an edit updates them, ``kubectl scale``
moves the pump StatefulSet; a bad spec and a blocked scale-down are reported on the resource.
The scale-down test runs real pump processes on loopback (node id = pod name, registered in a
real etcd) with a real drainer writing into SQLite: the operator closes the removed pumps
through their HTTP API and shrinks only once the registry shows them offline, and every binlog
written before the scale-down reaches the downstream. No kubelet runs, so pods stay pending; the
pumps stand in for them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from services.demo.procs import free_port_pair
from tests.support.certs import make_ca
from tests.support.etcd import EtcdProcess
from tests.support.k8s import (
    InstalledChart,
    KubeApiServer,
    eventually,
    eventually_async,
    run_operator,
)
from tests.support.k8s_cluster import FAST, apply, cluster, etcdctl_put, events, start_drainer
from tests.support.k8s_workload import downstream_ids, table_writer
from tests.support.pump import PumpProcess, pump_config, running_pump, start_pump_process
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus, FeedState, RunningError
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.wire.ts import compose

pytestmark = [pytest.mark.slow, pytest.mark.etcd]


def replicas(kube: KubeApiServer, ns: str, sts: str) -> int | None:
    found = kube.get("statefulset", sts, "-n", ns)
    return None if found is None else int(found["spec"]["replicas"])


def condition(kube: KubeApiServer, ns: str, name: str, type_: str) -> dict[str, Any] | None:
    bc = kube.get("bc", name, "-n", ns) or {}
    found = [c for c in bc.get("status", {}).get("conditions", []) if c["type"] == type_]
    return found[0] if found else None


@pytest.fixture
def namespace(binlog_chart: InstalledChart, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = request.node.name.replace("_", "-")[:50].strip("-").lower()
    binlog_chart.kube.kubectl("create", "namespace", ns)
    yield ns


def test_apply_edit_scale_and_report(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube, ns = binlog_chart.kube, namespace
    with run_operator(binlog_chart, ns, tmp_path, FAST) as op:
        drainer = {"name": "down", "sinkURI": "sqlite:///var/lib/binlog/drainer/down.db"}
        apply(kube, ns, cluster("c1", etcd.endpoint, 3, drainers=[drainer]))
        eventually(lambda: replicas(kube, ns, "c1-pump") == 3, "pump StatefulSet with 3")
        bc = kube.get("bc", "c1", "-n", ns)
        for kind, name in [
            ("statefulset", "c1-capture"),
            ("service", "c1-pump"),
            ("configmap", "c1-pump"),
            ("pump", "c1-pump-0"),
            ("drainer", "c1-drainer-down"),
        ]:
            obj = kube.get(kind, name, "-n", ns)
            assert obj is not None, (kind, name)
            (owner,) = obj["metadata"]["ownerReferences"]
            assert owner["uid"] == bc["metadata"]["uid"] and owner["kind"] == "BinlogCluster"
        # a drainer's objects are its Drainer's
        drainer_uid = kube.get("drainer", "c1-drainer-down", "-n", ns)["metadata"]["uid"]
        for kind in ("statefulset", "service", "configmap"):
            obj = eventually(lambda k=kind: kube.get(k, "c1-drainer-down", "-n", ns), kind)
            (owner,) = obj["metadata"]["ownerReferences"]
            assert owner["uid"] == drainer_uid and owner["kind"] == "Drainer"
        pump_toml = kube.get("configmap", "c1-pump", "-n", ns)["data"]["pump.toml"]
        assert f'pd-urls = "{etcd.endpoint}"' in pump_toml

        # an edit: pump config and a second drainer
        patch = {
            "spec": {
                "pumps": {"config": {"gc": 3}},
                "drainers": [drainer, {"name": "files", "sinkURI": "file:///x"}],
            }
        }
        kube.kubectl("patch", "bc", "c1", "-n", ns, "--type=merge", "-p", json.dumps(patch))
        eventually(
            lambda: "gc = 3" in kube.get("configmap", "c1-pump", "-n", ns)["data"]["pump.toml"],
            "pump config edited",
        )
        eventually(lambda: replicas(kube, ns, "c1-drainer-files") == 1, "second drainer")

        # scale subresource: up, then down (these pumps never ran, so none holds a binlog)
        kube.kubectl("scale", "bc/c1", "-n", ns, "--replicas=5")
        eventually(lambda: replicas(kube, ns, "c1-pump") == 5, "scaled up to 5")
        eventually(
            lambda: kube.get("bc", "c1", "-n", ns)["status"].get("pumpReplicas") == 5,
            "status.pumpReplicas 5",
        )
        scale = json.loads(
            kube.kubectl(
                "get", "--raw", f"/apis/binlog.io/v1alpha1/namespaces/{ns}/binlogclusters/c1/scale"
            ).stdout
        )
        assert scale["spec"]["replicas"] == 5 and scale["status"]["replicas"] == 5
        assert "app.kubernetes.io/component=pump" in scale["status"]["selector"]
        kube.kubectl("scale", "bc/c1", "-n", ns, "--replicas=2")
        eventually(lambda: replicas(kube, ns, "c1-pump") == 2, "scaled down to 2")
        # status is patched when the reconcile handler returns, a moment after the StatefulSet
        table = eventually(
            lambda: (
                (t := kube.kubectl("get", "bc", "-n", ns).stdout.split())[13:16] == ["c1", "2", "2"]
                and t
            ),
            "kubectl get bc shows 2 current pumps",
        )
        assert table[:13] == [
            *("NAME", "PUMPS", "CURRENT", "ONLINE", "DRAINERS", "READY"),
            *("PUMP", "VERSION", "DRAINER", "VERSION", "CAPTURE", "VERSION", "AGE"),
        ]
        # 2 pump pods, none online; 2 Drainers, none online
        eventually(
            lambda: kube.kubectl("get", "bc", "-n", ns).stdout.split()[16:18] == ["0/2", "0/2"],
            "pumps and drainers summed up",
        )
        assert not kube.get("pump", "c1-pump-2", "-n", ns)  # scaled away with its pod
        # the registry is read: no pump ran, so the cluster is not ready, and says why
        ready = eventually(lambda: condition(kube, ns, "c1", "Ready"), "Ready condition")
        assert ready["status"] == "False" and "c1-pump-0" in ready["message"]
        assert op.proc.poll() is None


def test_a_blocked_scale_down_and_a_bad_spec_are_reported(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube, ns = binlog_chart.kube, namespace
    addresses = tmp_path / "pumps.json"
    addresses.write_text("{}")  # the operator cannot reach any pump
    env = {**FAST, "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses)}
    with run_operator(binlog_chart, ns, tmp_path, env):
        apply(kube, ns, cluster("c2", etcd.endpoint, 2))
        eventually(lambda: replicas(kube, ns, "c2-pump") == 2, "pump StatefulSet with 2")
        # c2-pump-1 is registered and online (as a running pump would be), but unreachable
        status = NodeStatus("c2-pump-1", "127.0.0.1:1", NodeState.ONLINE)
        etcdctl_put(etcd, "/tidb-binlog/v1/pumps/c2-pump-1", status.to_json().decode())
        kube.kubectl("scale", "bc/c2", "-n", ns, "--replicas=1")
        degraded = eventually(
            lambda: (c := condition(kube, ns, "c2", "Degraded")) and c["status"] == "True" and c,
            "Degraded condition",
        )
        assert degraded["reason"] == "ScaleDownFailed"
        assert "no address for" in degraded["message"] and "c2-pump-1" in degraded["message"]
        assert replicas(kube, ns, "c2-pump") == 2  # left as it was
        warned = eventually(lambda: events(kube, ns, "ScaleDownFailed"), "ScaleDownFailed event")
        assert warned[0]["type"] == "Warning"

        # a cluster-level problem (a drainer's marks only its Drainer: test_k8s_nodes)
        bad = cluster("c3", etcd.endpoint, 1)
        bad["spec"]["pumps"]["config"] = {"addr": "0.0.0.0:1"}
        apply(kube, ns, bad)
        invalid = eventually(lambda: condition(kube, ns, "c3", "Degraded"), "InvalidSpec")
        assert invalid["reason"] == "InvalidSpec" and "pumps.config.addr" in invalid["message"]
        assert replicas(kube, ns, "c3-pump") is None  # nothing half-applied
        kube.kubectl("delete", "bc", "c3", "-n", ns, "--wait=false")  # no pumps: nothing blocks
        eventually(lambda: kube.get("bc", "c3", "-n", ns) is None, "c3 deleted")

        # deletion is blocked too while the pump cannot be closed; the escape hatch releases it
        kube.kubectl("delete", "bc", "c2", "-n", ns, "--wait=false")
        blocked = eventually(lambda: events(kube, ns, "TeardownBlocked"), "TeardownBlocked event")
        assert "c2-pump-1" in blocked[0]["message"]
        assert kube.get("bc", "c2", "-n", ns) is not None
        kube.kubectl("annotate", "bc", "c2", "-n", ns, "binlog.io/skip-pump-offline=true")
        eventually(lambda: kube.get("bc", "c2", "-n", ns) is None, "c2 deleted")


@pytest.mark.timeout(400)
async def test_scale_down_closes_real_pumps_first_and_loses_no_binlog(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    kube, ns = binlog_chart.kube, namespace
    pumps: list[PumpProcess] = []
    drainer = None
    try:
        for i in range(3):
            (tmp_path / f"p{i}").mkdir()
            pumps.append(
                start_pump_process(
                    tmp_path / f"p{i}",
                    etcd.endpoint,
                    "--node-id",
                    f"c4-pump-{i}",
                    "--gen-binlog-interval",
                    "0.5",
                )
            )
        addresses = tmp_path / "pumps.json"
        drainer_port = free_port_pair()
        nodes = {f"{ns}/c4-pump-{i}": f"127.0.0.1:{p.http_port}" for i, p in enumerate(pumps)}
        nodes[f"{ns}/c4-drainer-down-0"] = f"127.0.0.1:{drainer_port + 1}"
        addresses.write_text(json.dumps(nodes))
        db = tmp_path / "down.db"
        drainer = start_drainer(tmp_path, etcd.endpoint, "c4-drainer-down-0", db, port=drainer_port)
        env = {**FAST, "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses)}
        with run_operator(binlog_chart, ns, tmp_path, env):
            spec = cluster(
                "c4", etcd.endpoint, 3, drainers=[{"name": "down", "sinkURI": "sqlite:///d.db"}]
            )
            apply(kube, ns, spec)
            await eventually_async(lambda: replicas(kube, ns, "c4-pump") == 3, "3 pumps")
            ready = await eventually_async(
                lambda: (c := condition(kube, ns, "c4", "Ready")) and c["status"] == "True" and c,
                "Ready with the real pumps and drainer",
            )
            assert ready["reason"] == "AllOnline"
            status = kube.get("bc", "c4", "-n", ns)["status"]
            assert [(p["nodeId"], p["state"]) for p in status["pumps"]] == [
                (f"c4-pump-{i}", "online") for i in range(3)
            ]
            assert [d["nodeId"] for d in status["drainers"]] == ["c4-drainer-down-0"]

            async with (
                table_writer(etcd.endpoint) as write,
                EtcdKv.connect([etcd.endpoint]) as kv,
            ):
                written = set(range(1, 61))
                await write(sorted(written))
                used = {p.node_id for p in await NodeRegistry(kv).list(NodeKind.PUMP)}
                assert used == {"c4-pump-0", "c4-pump-1", "c4-pump-2"}

                kube.kubectl("scale", "bc/c4", "-n", ns, "--replicas=1")
                await eventually_async(
                    lambda: replicas(kube, ns, "c4-pump") == 1, "shrunk to 1", within=120
                )
                # the shrink came after the removed pumps went offline, and they exited
                registry = NodeRegistry(kv)
                for i in (1, 2):
                    status = await registry.get(NodeKind.PUMP, f"c4-pump-{i}")
                    assert status is not None and status.state is NodeState.OFFLINE
                    assert pumps[i].proc.wait(30) == 0
                status = await registry.get(NodeKind.PUMP, "c4-pump-0")
                assert status is not None and status.state is NodeState.ONLINE

                # nothing written before the scale-down is missing downstream
                await eventually_async(
                    lambda: downstream_ids(db) >= written, "every row downstream", within=120
                )
                # and writes go on through the remaining pump
                await write([1000])
                await eventually_async(lambda: 1000 in downstream_ids(db), "a later row")

            # deleting the cluster takes the last pump offline before it goes, then the
            # drainer (it consumed the pump's binlogs first)
            kube.kubectl("delete", "bc", "c4", "-n", ns, "--wait=false")
            await eventually_async(
                lambda: kube.get("bc", "c4", "-n", ns) is None, "c4 deleted", within=120
            )
            assert pumps[0].proc.wait(30) == 0
            assert drainer.wait(30) == 0
            async with EtcdKv.connect([etcd.endpoint]) as kv:
                registry = NodeRegistry(kv)
                for kind, node in [
                    (NodeKind.PUMP, "c4-pump-0"),
                    (NodeKind.DRAINER, "c4-drainer-down-0"),
                ]:
                    status = await registry.get(kind, node)
                    assert status is not None and status.state is NodeState.OFFLINE, node
    finally:
        for p in pumps:
            if p.proc.poll() is None:
                p.kill()
        if drainer is not None:
            drainer.terminate()
            drainer.wait(30)


def exists(kube: KubeApiServer, ns: str, kind: str, name: str) -> bool:
    return kube.get(kind, name, "-n", ns) is not None


def deleting(kube: KubeApiServer, ns: str, kind: str, name: str) -> bool:
    """Gone, or deleted and waiting for its finalizers."""
    found = kube.get(kind, name, "-n", ns)
    return found is None or "deletionTimestamp" in found["metadata"]


@pytest.mark.timeout(300)
async def test_changefeeds_are_reported_and_a_removed_drainer_goes_offline_before_it_goes(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    """status.changefeeds comes from the capture cluster's records (written here with its own
    model classes, where the captures' ``--cluster-id`` puts them). A drainer removed from the
    spec is closed through its HTTP API, and only once the registry shows it offline are its
    StatefulSet, Service, ConfigMap and volume claim deleted; while it cannot be closed they
    stay and Degraded/a Warning event say why."""
    kube, ns = binlog_chart.kube, namespace
    addresses = tmp_path / "pods.json"
    addresses.write_text("{}")
    port = free_port_pair()
    # no pump runs, so no TSO answers: start from commit ts 0
    old = "c5-drainer-old-0"
    drainer = start_drainer(
        tmp_path, etcd.endpoint, old, tmp_path / "old.db", "--initial-commit-ts", "0", port=port
    )
    env = {**FAST, "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses)}
    try:
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            registry = NodeRegistry(kv)

            async def drainer_state() -> NodeState | None:
                s = await registry.get(NodeKind.DRAINER, "c5-drainer-old-0")
                return None if s is None else s.state

            keys = Keys("default")  # the captures' --cluster-id
            feed, failed = FeedId("default", "orders"), FeedId("default", "audit")
            ts = compose(1712905541123, 3)  # 2024-04-12T07:05:41.123Z
            info = ChangeFeedInfo("default", "orders", "mysql://app:secret@db:3306/", ts - 1000)
            await kv.put(keys.info_key(feed), info.to_json())
            await kv.put(keys.status_key(feed), ChangeFeedStatus(ts).to_json())
            error = RunningError("table t has no primary key", code="CDC:ErrNoPK")
            broken = ChangeFeedInfo(
                "default", "audit", "file:///audit", 1, state=FeedState.FAILED, error=error
            )
            await kv.put(keys.info_key(failed), broken.to_json())

            with run_operator(binlog_chart, ns, tmp_path, env):
                both = [
                    {"name": "keep", "sinkURI": "file:///keep"},
                    {"name": "old", "sinkURI": "file:///old"},
                ]
                apply(kube, ns, cluster("c5", etcd.endpoint, 1, drainers=both))
                feeds = await eventually_async(
                    lambda: (kube.get("bc", "c5", "-n", ns).get("status") or {}).get("changefeeds"),
                    "status.changefeeds",
                )
                assert feeds == [
                    {
                        "id": "audit",
                        "namespace": "default",
                        "state": "failed",
                        "sinkURI": "file:///audit",
                        "error": "CDC:ErrNoPK: table t has no primary key",
                    },
                    {
                        "id": "orders",
                        "namespace": "default",
                        "state": "normal",
                        "sinkURI": "mysql://app:******@db:3306/",
                        "checkpointTS": ts,
                        "checkpointTime": "2024-04-12T07:05:41.123Z",
                    },
                ]
                await eventually_async(
                    lambda: exists(kube, ns, "statefulset", "c5-drainer-old"), "drainer old"
                )
                claim = {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data-c5-drainer-old-0"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
                apply(kube, ns, claim)  # what the StatefulSet controller would have made
                for _ in range(120):
                    if await drainer_state() is NodeState.ONLINE:
                        break
                    await asyncio.sleep(0.5)
                assert await drainer_state() is NodeState.ONLINE

                # "old" leaves the spec while the operator cannot reach it: nothing is deleted
                apply(kube, ns, cluster("c5", etcd.endpoint, 1, drainers=both[:1]))
                degraded = await eventually_async(
                    lambda: (
                        (c := condition(kube, ns, "c5", "Degraded"))
                        and c["reason"] == "DrainerRemovalFailed"
                        and c
                    ),
                    "Degraded=DrainerRemovalFailed",
                )
                assert degraded["status"] == "True"
                assert "c5-drainer-old-0" in degraded["message"]
                warned = await eventually_async(
                    lambda: events(kube, ns, "DrainerRemovalFailed"), "DrainerRemovalFailed event"
                )
                assert warned[0]["type"] == "Warning"
                for kind in ("statefulset", "service", "configmap"):
                    assert exists(kube, ns, kind, "c5-drainer-old"), kind
                assert exists(kube, ns, "pvc", "data-c5-drainer-old-0")
                assert await drainer_state() is NodeState.ONLINE
                # the timer's Ready condition and the reconcile's Degraded both stay
                await eventually_async(
                    lambda: condition(kube, ns, "c5", "Ready"), "Ready next to Degraded"
                )
                still = condition(kube, ns, "c5", "Degraded")
                assert still is not None and still["reason"] == "DrainerRemovalFailed"

                # reachable now: closed, offline, then its objects go; "keep" stays
                addresses.write_text(
                    json.dumps({f"{ns}/c5-drainer-old-0": f"127.0.0.1:{port + 1}"})
                )
                await eventually_async(
                    lambda: not exists(kube, ns, "statefulset", "c5-drainer-old"),
                    "drainer old's StatefulSet deleted",
                )
                assert await drainer_state() is NodeState.OFFLINE
                assert drainer.wait(30) == 0
                for kind in ("service", "configmap"):
                    await eventually_async(
                        lambda k=kind: not exists(kube, ns, k, "c5-drainer-old"), f"{kind} deleted"
                    )
                # no controller-manager runs to drop the pvc-protection finalizer: deleting
                await eventually_async(
                    lambda: deleting(kube, ns, "pvc", "data-c5-drainer-old-0"), "claim deleted"
                )
                for kind in ("statefulset", "service", "configmap"):
                    assert exists(kube, ns, kind, "c5-drainer-keep"), kind
                await eventually_async(
                    lambda: (c := condition(kube, ns, "c5", "Degraded")) and c["status"] == "False",
                    "Degraded cleared",
                )
                await eventually_async(
                    lambda: events(kube, ns, "DrainerRemoved"), "DrainerRemoved event"
                )
    finally:
        if drainer.poll() is None:
            drainer.terminate()
            drainer.wait(30)


@pytest.mark.timeout(300)
async def test_with_a_tls_secret_pumps_are_closed_over_mutual_tls(
    binlog_chart: InstalledChart, namespace: str, etcd: EtcdProcess, tmp_path: Path
) -> None:
    """The pumps serve HTTPS and require a client certificate; the operator reads the cluster's
    TLS Secret through the API (its RBAC allows get on secrets) and closes the removed pump
    with it, then shrinks."""
    kube, ns = binlog_chart.kube, namespace
    ca = make_ca(tmp_path / "pki")
    leaf = ca.issue("c6-pump")
    kube.kubectl(
        "create", "secret", "generic", "c6-tls", "-n", ns,
        f"--from-file=ca.crt={ca.cert}",
        f"--from-file=tls.crt={leaf.cert}",
        f"--from-file=tls.key={leaf.key}",
    )  # fmt: skip
    addresses = tmp_path / "pods.json"
    env = {**FAST, "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses)}
    async with AsyncExitStack() as stack:
        pumps = []
        for i in range(2):
            cfg = pump_config(
                tmp_path / f"p{i}",
                etcd.endpoint,
                node_id=f"c6-pump-{i}",
                security=ca.security(leaf),
            )
            pumps.append(await stack.enter_async_context(running_pump(cfg)))
        addresses.write_text(
            json.dumps(
                {
                    f"{ns}/c6-pump-{i}": f"127.0.0.1:{p.started.http_port}"
                    for i, p in enumerate(pumps)
                }
            )
        )
        with run_operator(binlog_chart, ns, tmp_path, env):
            apply(kube, ns, cluster("c6", etcd.endpoint, 2, tls={"secretName": "c6-tls"}))
            await eventually_async(lambda: replicas(kube, ns, "c6-pump") == 2, "2 pumps")
            sts = kube.get("statefulset", "c6-pump", "-n", ns)
            volumes = sts["spec"]["template"]["spec"]["volumes"]
            assert {v["name"]: v.get("secret", {}).get("secretName") for v in volumes}[
                "tls"
            ] == "c6-tls"
            kube.kubectl("scale", "bc/c6", "-n", ns, "--replicas=1")
            await eventually_async(
                lambda: replicas(kube, ns, "c6-pump") == 1, "shrunk to 1", within=120
            )
            assert await asyncio.wait_for(pumps[1].task, 30) is NodeState.OFFLINE
            assert not pumps[0].task.done()
