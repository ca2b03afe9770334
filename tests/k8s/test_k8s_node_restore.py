"""Drainer backup and restore on the one-node cluster (``kube_node``), under a running workload.

A BinlogCluster ``demo`` in one namespace (2 pumps, a drainer into MariaDB ``A`` on the node's
bridge address) and a bank workload writing through the pumps for the whole test. While it
writes:

* ``mariadb-dump --single-transaction`` of ``A``'s bank and checkpoint tables, restored into a
  new MariaDB ``B`` (a consistent snapshot: the drainer writes each batch and its checkpoint row
  in one transaction, so the dump holds exactly the transactions up to the checkpoint it holds);
* ``kubectl exec`` of ``binlogctl export-drainer-state`` in the drainer's pod, reading that
  checkpoint from ``B`` and the DDL history up to it from etcd, printed to stdout;
* the export put in a ConfigMap of a second namespace, where a second BinlogCluster
  ``restored`` on the same etcd, with no pumps of its own, runs a drainer into ``B`` whose
  ``initialState`` names it: it continues after the export's checkpoint, pulling the first
  cluster's pumps.

Then the writers stop: no writer failed, and the checker finds both downstreams equal to the
workload's SQLite upstream (no gap and no repeat in ``B``). The figures are printed.
"""

from __future__ import annotations

import json
import subprocess
import time
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
    cleaned_up,
    downstream_equal,
    install_chart,
    ready_pods,
    run_pod,
    states,
)
from tests.support.k8snode_roll import start_bank, stop_bank

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _login(server: MariaDBServer) -> list[str]:
    return [f"--host={server.host}", f"--port={server.port}", f"--user={server.user}",
            f"--password={server.password}"]  # fmt: skip


def dump_and_restore(source: MariaDBServer, target: MariaDBServer, path: Path) -> None:
    with path.open("wb") as out:
        subprocess.run(
            ["mariadb-dump", "--single-transaction", *_login(source),
             "--databases", "bank", "tidb_binlog"],
            stdout=out, check=True, timeout=300,
        )  # fmt: skip
    with path.open("rb") as dumped:
        subprocess.run(["mariadb", *_login(target)], stdin=dumped, check=True, timeout=300)


def checkpoint(server: MariaDBServer) -> int:
    rows = server.admin("SELECT checkPoint FROM tidb_binlog.checkpoint")
    return max((json.loads(r[0])["commitTS"] for r in rows if r and r[0]), default=0)


def bank_ready(server: MariaDBServer) -> bool:
    found = server.admin(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'bank'"
    )
    return int(found[0][0]) > 0 and checkpoint(server) > 0


def cluster(name: str, ns: str, pumps: int, drainer: dict[str, Any]) -> dict[str, Any]:
    return binlog_cluster(name, ns, pumps=pumps, drainers=[drainer])


def test_drainer_restored_from_an_export_in_a_new_namespace_under_a_workload(
    kube_node: KubeNode, mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    node, ns, ns2 = kube_node, "restorea", "restoreb"
    began = time.monotonic()
    a = mariadb_instance("a", host=NODE_IP)
    b = mariadb_instance("b", host=NODE_IP)
    for db in (a, b):
        db.admin("CREATE USER 'drainer'@'%'; GRANT ALL ON *.* TO 'drainer'@'%'")
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    with cleaned_up(node, ns2, ns):
        install_chart(node, "--set", "operator.statusInterval=5")
        figures = _restore(node, ns, ns2, a, b, upstream_dir, tmp_path)
    figures["node_seconds"] = round(time.monotonic() - began)
    print("restore figures:", json.dumps(figures))


def _restore(
    node: KubeNode,
    ns: str,
    ns2: str,
    a: MariaDBServer,
    b: MariaDBServer,
    upstream_dir: Path,
    tmp_path: Path,
) -> dict[str, Any]:
    node.kubectl("create", "namespace", ns)
    drainer_a = {"name": "down", "sinkURI": f"mysql://drainer@{NODE_IP}:{a.port}/"}
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster("demo", ns, 2, drainer_a)))
    pod_a = "demo-drainer-down-0"
    eventually(
        lambda: (
            len(ready_pods(node, ns, PUMP_PODS)) == 2
            and ready_pods(node, ns, "binlog.io/drainer=down") == [pod_a]
        ),
        "two pump pods and the drainer's ready",
        within=420,
        every=3,
    )
    run_pod(
        node,
        ns,
        "tso",
        ["binlog-tso", "--pd-urls", ETCD, "--addr", "0.0.0.0:8240",
         "--advertise-addr", "$(POD_IP):8240"],
    )  # fmt: skip
    start_bank(node, ns, "bank", upstream_dir, seconds=600, seed=1)
    eventually(lambda: bank_ready(a), "the bank replicated into A", within=180, every=2)
    time.sleep(5)  # a few seconds of transfers into A

    started = time.monotonic()
    dump_and_restore(a, b, tmp_path / "a.sql")
    at = checkpoint(b)
    export = node.kubectl(
        "exec", pod_a, "-n", ns, "--", "binlogctl", "-cmd", "export-drainer-state",
        "-pd-urls", ETCD, "-node-id", pod_a, "-sink-url", f"mysql://drainer@{NODE_IP}:{b.port}/",
    ).stdout  # fmt: skip
    state = json.loads(export)
    assert state["checkpoint"] == {**state["checkpoint"], "commit_ts": at, "source": "downstream"}
    assert state["schema"]["jobs"], state["schema"]
    state_file = tmp_path / "drainer-state.json"
    state_file.write_text(export)

    node.kubectl("create", "namespace", ns2)
    node.kubectl(
        "create", "configmap", "demo-down-state", "-n", ns2,
        f"--from-file=drainer-state.json={state_file}",
    )  # fmt: skip
    drainer_b = {
        "name": "down",
        "sinkURI": f"mysql://drainer@{NODE_IP}:{b.port}/",
        "initialState": {"name": "demo-down-state"},
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster("restored", ns2, 0, drainer_b)))
    pod_b = "restored-drainer-down-0"
    eventually(
        lambda: ready_pods(node, ns2, "binlog.io/drainer=down") == [pod_b],
        "the restored drainer ready",
        within=300,
        every=3,
    )
    eventually(
        lambda: states(node, "drainers").get(pod_b) == "online", "restored online", within=120
    )
    restored_seconds = time.monotonic() - started
    eventually(lambda: checkpoint(b) > at, "the restored drainer applying into B", within=120)
    log = node.kubectl("logs", pod_b, "-n", ns2).stdout
    assert f"after commit ts {at}" in log and "starting from the exported state" in log, log[-3000:]
    time.sleep(10)  # the writers go on with both drainers running

    stats = stop_bank(node, ns, "bank")
    assert stats["failures"] == 0, stats
    for name, db in (("A", a), ("B", b)):
        report = eventually(
            lambda db=db: downstream_equal(upstream_dir / "up.db", db.dsn()),
            f"the MariaDB downstream {name} equal to the upstream",
            within=300,
            every=3,
        )
        print(f"checker ({name}):", report.strip().splitlines()[-1] if report.strip() else report)
    return {
        "export_checkpoint": at,
        "ddl_jobs_exported": len(state["schema"]["jobs"]),
        "dump_export_and_restored_drainer_online_seconds": round(restored_seconds),
        "workload": stats,
    }
