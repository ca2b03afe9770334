"""A BinlogCluster's pieces on the one-node cluster (``kube_node``): the chart's etcd read from
the host, pods of the product image, a bank workload writing through the pump client, the
checker comparing a SQLite upstream with a drainer's downstream (SQLite on a hostPath volume, or a
MariaDB on the host reached over the node's bridge), and ``kubectl get`` tables as rows."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.k8s import CHART
from tests.support.k8snode import KubeNode, wait_pod_phase

RELEASE = "binlog"
SYSTEM_NS = "binlog-system"
ETCD = f"http://{RELEASE}-etcd-0.{RELEASE}-etcd.{SYSTEM_NS}.svc:2379"


def _uninstall(node: KubeNode) -> None:
    """The release gone, and its etcd's claim with it (a new release starts from empty)."""
    node.helm(
        "uninstall", RELEASE, "--namespace", SYSTEM_NS, "--ignore-not-found", "--wait",
        "--timeout", "5m", check=False, timeout=360,
    )  # fmt: skip
    node.kubectl(
        "delete", "pvc", "--all", "-n", SYSTEM_NS, "--ignore-not-found", "--wait=true",
        "--timeout=120s", check=False, timeout=180,
    )  # fmt: skip


def install_chart(node: KubeNode, *values: str) -> None:
    """``helm install`` of the chart as ``RELEASE`` with its etcd and the node's image; a
    release that an earlier test left behind is removed first."""
    _uninstall(node)
    node.helm(
        "install", RELEASE, str(CHART), "--namespace", SYSTEM_NS, "--create-namespace",
        "--set", "etcd.enabled=true", "--set", f"etcd.image={node.image}",
        "--set", "image.pullPolicy=Never", *values, "--wait", "--timeout", "8m",
        timeout=600,
    )  # fmt: skip


@contextmanager
def cleaned_up(node: KubeNode, *namespaces: str) -> Iterator[None]:
    """What a test made on the shared node goes when it ends, passed or failed: its
    namespaces (deleted while the operator still runs), then the chart's release. On a failure
    the namespaces' and the chart's events and pod logs are printed first (pytest shows them
    with the failure)."""
    try:
        yield
    except BaseException:
        dump_diagnostics(node, SYSTEM_NS, *namespaces)
        raise
    finally:
        for ns in namespaces:
            _delete_namespace(node, ns)
        _uninstall(node)


def _delete_namespace(node: KubeNode, ns: str) -> None:
    """Delete ``ns`` and wait until it is gone, so that none of its pods outlives the test and
    talks to the next test's etcd (the chart's etcd has the same address in every test). The
    operator still runs and closes what it manages; what it cannot close within the wait has
    its finalizers removed."""
    done = node.kubectl(
        "delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=180s",
        check=False, timeout=240,
    )  # fmt: skip
    if done.returncode == 0:
        return
    for kind in ("binlogclusters", "drainers", "pumps"):
        names = node.kubectl("get", kind, "-n", ns, "-o", "name", check=False).stdout.split()
        for obj in names:
            node.kubectl(
                "patch", obj, "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":[]}}',
                check=False,
            )  # fmt: skip
    node.kubectl(
        "wait", "--for=delete", f"namespace/{ns}", "--timeout=180s", check=False, timeout=240
    )


def dump_diagnostics(node: KubeNode, *namespaces: str) -> None:
    """Print each namespace's events and every pod's logs (the last lines of the current and
    of the previous container), for a failed test's report."""
    for ns in namespaces:
        events = node.kubectl(
            "get", "events", "-n", ns, "--sort-by=.lastTimestamp", check=False, timeout=60
        )
        print(f"===== events in {ns}\n{events.stdout}{events.stderr}")
        pods = node.kubectl(
            "get", "pods", "-n", ns, "-o", "name", check=False, timeout=60
        ).stdout.split()
        for pod in pods:
            for previous in ("false", "true"):
                out = node.kubectl(
                    "logs", pod, "-n", ns, "--all-containers", f"--previous={previous}",
                    "--tail=150", "--timestamps", check=False, timeout=60,
                )  # fmt: skip
                if out.stdout.strip():
                    which = "previous container" if previous == "true" else "current"
                    print(f"===== {ns}/{pod} ({which})\n{out.stdout}")


PUMP_PODS = "app.kubernetes.io/instance=demo,app.kubernetes.io/component=pump"
DRAINER_PODS = "binlog.io/drainer=down"  # the pods of a drainer entry named "down"
# the node's bridge address (scripts/k8s-node's NODE_IP): pods reach host processes bound to it
NODE_IP = "10.209.0.1"
# the node's volumes are host paths on the machine's disk: a floor its free space is above
PUMP_CONFIG = {"storage": {"stop-write-at-available-space": "64MiB"}}


def binlog_cluster(
    name: str, ns: str, *, pumps: int, pump_spec: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """A BinlogCluster on the node: the chart's etcd, the imported image (never pulled), and
    ``pumps`` pumps on 1Gi volumes with ``PUMP_CONFIG`` (``pump_spec`` adds or replaces keys of
    ``spec.pumps``); ``spec`` adds the rest (``drainers``, ``captures``, ``tls``, ...)."""
    pump = {"replicas": pumps, "storage": {"size": "1Gi"}, "config": PUMP_CONFIG}
    return {
        "apiVersion": "binlog.io/v1alpha1",
        "kind": "BinlogCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "etcd": {"endpoints": [ETCD]},
            "imagePullPolicy": "Never",
            "pumps": {**pump, **(pump_spec or {})},
            **spec,
        },
    }


def etcd_range(node: KubeNode, prefix: bytes) -> list[tuple[str, bytes, int]]:
    """Every key under ``prefix`` of the chart's etcd as (key without the prefix, value, create
    revision), read through its JSON gateway at the etcd pod's address."""
    pod = node.get("pod", f"{RELEASE}-etcd-0", "-n", SYSTEM_NS)
    ip = pod["status"]["podIP"]
    body = json.dumps({
        "key": base64.b64encode(prefix).decode(),
        "range_end": base64.b64encode(prefix[:-1] + b"0").decode(),
    }).encode()  # fmt: skip
    req = urllib.request.Request(f"http://{ip}:2379/v3/kv/range", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        kvs = json.loads(r.read()).get("kvs", [])
    return [
        (
            base64.b64decode(kv["key"]).decode().removeprefix(prefix.decode()),
            base64.b64decode(kv["value"]),
            int(kv.get("create_revision", 0)),
        )
        for kv in kvs
    ]


def etcd_nodes(node: KubeNode, kind: str) -> dict[str, dict[str, Any]]:
    """``/tidb-binlog/v1/<kind>/*`` of the chart's etcd: node id -> its JSON status."""
    got = etcd_range(node, f"/tidb-binlog/v1/{kind}/".encode())
    return {key: json.loads(value) for key, value, _ in got}


def capture_cluster(node: KubeNode, cluster: str = "default") -> tuple[dict[str, Any], str]:
    """The captures registered under ``/tidb/cdc/<cluster>/__cdc_meta__/capture/`` (capture id ->
    its CaptureInfo) and the elected owner's capture id ("" when none): of the election's keys
    ``owner/<lease hex>``, the one created first owns (etcd's election rule)."""
    got = etcd_range(node, f"/tidb/cdc/{cluster}/__cdc_meta__/".encode())
    captures = {
        k.removeprefix("capture/"): json.loads(v) for k, v, _ in got if k.startswith("capture/")
    }
    candidates = sorted((rev, v.decode()) for k, v, rev in got if k.startswith("owner/"))
    return captures, candidates[0][1] if candidates else ""


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


def table(node: KubeNode, ns: str, what: str) -> list[dict[str, str]]:
    """``kubectl get <what>`` as rows of {column: value} (columns are 2+ spaces apart)."""
    lines = node.kubectl("get", what, "-n", ns).stdout.strip().splitlines()
    rows: list[dict[str, str]] = []
    header: list[str] = []
    for line in lines:
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == "NAME":
            header = cells
        elif header and line.strip():
            rows.append(dict(zip(header, cells, strict=False)))
    return rows


def downstream_equal(upstream: Path, downstream: Path | str) -> str | None:
    """The checker's report when both sides are equal, else None. ``downstream`` is a SQLite
    file or a database URL (``mysql://...``)."""
    if isinstance(downstream, Path) and not downstream.exists():
        return None
    url = f"sqlite://{downstream}" if isinstance(downstream, Path) else downstream
    done = subprocess.run(
        [sys.executable, "-m", "tributary.checker", "-u", f"sqlite://{upstream}", "-d", url],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    return done.stdout or "equal" if done.returncode == 0 else None
