"""Day two on the one-node cluster (``kube_node``): the TLS Secret rotated to a new CA under a
running workload, picked up in place by the pumps, the drainer, the capture and the writers.

One BinlogCluster with ``spec.tls`` (2 pumps, whose embedded TSO serves over TLS too, a drainer
into MariaDB on the node's bridge address, a capture) and a bank workload writing through the pump
client over mutual TLS with the same Secret mounted. The Secret is replaced three times, as a
rotation to a new CA is done: ``ca.crt`` with both CAs, then the new CA's certificate and key,
then ``ca.crt`` with the new CA only. After each update (the pods annotated, so the kubelet
refreshes their Secret volumes now rather than at its next sync) every pod's HTTPS endpoint is
checked from the host until it shows the step: it accepts a client certificate of the new CA,
then presents the new certificate, then refuses a client of the old CA and a client presenting
the old CA's certificate. The pods are never restarted (same uid, no container restart). Then a
pump pod is deleted: the drainer and the writers connect to its replacement with the files they
reloaded (it trusts the new CA only). The writers stop: no failure, the checker finds MariaDB
equal to the workload's upstream. The figures (each step's seconds, the writers' counters) are
printed.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.k8s import eventually
from tests.support.k8snode import KubeNode, wait_pod_phase
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
from tests.support.k8snode_roll import stop_bank
from tests.support.tls_rotation import Rotation, make_rotation
from tributary.settings.security import SecuritySettings
from tributary.telemetry.tls import ALPN_HTTP, client_context

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

NS, NAME, SECRET = "tlsrot", "demo", "demo-tls"
TLS_DIR = "/etc/binlog/tls"
CAPTURE_PODS = "app.kubernetes.io/component=capture"
CLUSTER_PODS = f"app.kubernetes.io/instance={NAME}"
PORTS = {"pump": 8250, "drainer": 8249, "capture": 8300}  # HTTPS (HTTP API) of each component


def test_certificates_rotated_to_a_new_ca_under_a_workload(
    kube_node: KubeNode, mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    node = kube_node
    began = time.monotonic()
    rotation = make_rotation(tmp_path / "pki")
    db = mariadb_instance("node", host=NODE_IP)
    db.admin("CREATE USER 'drainer'@'%'; GRANT ALL ON *.* TO 'drainer'@'%'")
    sink = f"mysql://drainer@{NODE_IP}:{db.port}/"
    upstream_dir = tmp_path / "upstream"
    upstream_dir.mkdir()
    upstream_dir.chmod(0o777)  # the workload pod runs as the image's user
    with cleaned_up(node, NS):
        install_chart(node, "--set", "operator.statusInterval=5")
        figures = _rotate(node, rotation, sink, db.dsn(), upstream_dir)
    figures["node_seconds"] = round(time.monotonic() - began)
    print("tls rotation figures:", json.dumps(figures))


def _rotate(
    node: KubeNode, rotation: Rotation, sink: str, downstream: str, upstream_dir: Path
) -> dict[str, Any]:
    node.kubectl("create", "namespace", NS)
    _put_secret(node, rotation, "old", "old")
    node.kubectl("create", "secret", "generic", "upstream", "-n", NS,
                 f"--from-literal=upstream={sink}")  # fmt: skip
    cluster = binlog_cluster(
        NAME,
        NS,
        pumps=2,
        tls={"secretName": SECRET},
        drainers=[{"name": "down", "sinkURI": sink}],
        captures={"replicas": 1, "upstreamSecret": {"name": "upstream", "key": "upstream"}},
    )
    node.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    pumps, drainer = [f"{NAME}-pump-0", f"{NAME}-pump-1"], f"{NAME}-drainer-down-0"
    capture = f"{NAME}-capture-0"
    eventually(
        lambda: (
            ready_pods(node, NS, PUMP_PODS) == pumps
            and ready_pods(node, NS, DRAINER_PODS) == [drainer]
            and ready_pods(node, NS, CAPTURE_PODS) == [capture]
        ),
        "two pump pods, the drainer's and the capture's ready (over TLS)",
        within=420,
        every=3,
    )
    eventually(
        lambda: states(node, "drainers").get(drainer) == "online", "the drainer online", within=120
    )
    servers = {p: "pump" for p in pumps} | {drainer: "drainer", capture: "capture"}
    old_client = rotation.security("old", "old")
    for pod, kind in servers.items():
        assert _answers(node, pod, kind, old_client), f"{pod} does not answer the old CA's client"
    _start_writers(node, upstream_dir)
    before = _pods(node)
    figures: dict[str, Any] = {}
    for step, (ca, leaf) in enumerate(Rotation.STEPS[1:], start=1):
        started = time.monotonic()
        _put_secret(node, rotation, ca, leaf)
        _hurry_kubelet(node, step)
        files = rotation.files(ca, leaf)
        eventually(
            lambda s=step, f=files: (
                _mounted(node, "bank") == f
                and all(_at_step(node, rotation, s, p, k) for p, k in servers.items())
            ),
            f"the writers' files and every pod serving step {step} ({ca} CA, {leaf} certificate)",
            within=180,
            every=3,
        )
        figures[f"step_{step}_seconds"] = round(time.monotonic() - started, 1)
    after = _pods(node)
    assert after == before, f"a pod was restarted or replaced: {before} -> {after}"

    # the drainer and the writers connect to a new pump with the files they reloaded
    old_uid = after[pumps[1]][0]
    node.kubectl("delete", "pod", pumps[1], "-n", NS, "--wait=false")
    eventually(
        lambda: (
            _pods(node).get(pumps[1], (old_uid,))[0] != old_uid
            and ready_pods(node, NS, PUMP_PODS) == pumps
            and states(node, "pumps").get(pumps[1]) == "online"
        ),
        f"{pumps[1]} replaced, ready and online",
        within=240,
        every=3,
    )
    assert _at_step(node, rotation, 3, pumps[1], "pump")
    time.sleep(10)  # writes landing on the replaced pump too, before the writers stop
    stats = stop_bank(node, NS, "bank")
    figures["workload"] = stats
    assert stats["failures"] == 0, stats
    assert stats["commits"] > 100, stats
    report = eventually(
        lambda: downstream_equal(upstream_dir / "up.db", downstream),
        "the MariaDB downstream equal to the upstream",
        within=300,
        every=3,
    )
    print("checker:", report.strip().splitlines()[-1] if report.strip() else report)
    return figures


def _put_secret(node: KubeNode, rotation: Rotation, ca: str, leaf: str) -> None:
    data = {k: base64.b64encode(v).decode() for k, v in rotation.files(ca, leaf).items()}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NS},
        "type": "Opaque",
        "data": data,
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(secret))


def _hurry_kubelet(node: KubeNode, step: int) -> None:
    """An annotation on each pod mounting the Secret: the kubelet syncs a changed pod at once,
    refreshing its Secret volumes (without it, within its sync period, about a minute)."""
    for selector in (CLUSTER_PODS, "app=bank"):
        node.kubectl(
            "annotate", "pods", "-n", NS, "-l", selector, f"binlog.io/tls-refresh={step}",
            "--overwrite",
        )  # fmt: skip


def _start_writers(node: KubeNode, upstream: Path) -> None:
    """``binlog-workload`` (bank, 20 transactions a second) over mutual TLS with the cluster's
    Secret mounted, not waited for."""
    tls = [f"--ssl-{k}={TLS_DIR}/{f}" for k, f in (("ca", "ca.crt"), ("cert", "tls.crt"),
                                                    ("key", "tls.key"))]  # fmt: skip
    run_pod(
        node,
        NS,
        "bank",
        ["binlog-workload", "--kind", "bank", "--upstream", "sqlite:///upstream/up.db",
         "--pd-urls", ETCD, "--duration", "900", "--rate", "20", "--writers", "4",
         "--seed", "3", "--accounts", "50", *tls],
        restartPolicy="Never",
        mounts=[{"name": "upstream", "mountPath": "/upstream"},
                {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}],
        volumes=[{"name": "upstream", "hostPath": {"path": str(upstream), "type": "Directory"}},
                 {"name": "tls", "secret": {"secretName": SECRET}}],
    )  # fmt: skip
    node.kubectl("label", "pod", "bank", "-n", NS, "app=bank")
    wait_pod_phase(node, NS, "bank", {"Running"}, within=180)


def _mounted(node: KubeNode, pod: str) -> dict[str, bytes]:
    """The TLS files as ``pod`` sees them."""
    read = "import sys; sys.stdout.write(open(sys.argv[1]).read())"
    return {
        key: node.kubectl(
            "exec", pod, "-n", NS, "--", "python", "-c", read, f"{TLS_DIR}/{key}", check=False
        ).stdout.encode()
        for key in ("ca.crt", "tls.crt", "tls.key")
    }


def _pods(node: KubeNode) -> dict[str, tuple[str, int]]:
    """Each cluster pod's (uid, container restarts)."""
    pods = node.get("pods", "-n", NS, "-l", CLUSTER_PODS) or {"items": []}
    return {
        p["metadata"]["name"]: (
            p["metadata"]["uid"],
            sum(c.get("restartCount", 0) for c in p.get("status", {}).get("containerStatuses", [])),
        )
        for p in pods["items"]
        if not p["metadata"].get("deletionTimestamp")
    }


def _at_step(node: KubeNode, rotation: Rotation, step: int, pod: str, kind: str) -> bool:
    """Whether ``pod`` serves with what the Secret holds after ``step``, seen from clients."""
    if step == 1:  # trusts the new CA too, still presents the old certificate
        return _answers(node, pod, kind, rotation.security("old", "new"))
    if step == 2:  # presents the new certificate (and still accepts an old client certificate)
        return _answers(node, pod, kind, rotation.security("new", "new")) and _answers(
            node, pod, kind, rotation.security("new", "old")
        )
    return (  # the new CA only: a client of the old CA, or with its certificate, is refused
        _answers(node, pod, kind, rotation.security("new", "new"))
        and not _answers(node, pod, kind, rotation.security("old", "old"))
        and not _answers(node, pod, kind, rotation.security("new", "old"))
    )


def _answers(node: KubeNode, pod: str, kind: str, security: SecuritySettings) -> bool:
    """``GET /health`` of the pod's HTTPS port from the host with this client: True on 200,
    False when the handshake or the request is refused."""
    found = node.get("pod", pod, "-n", NS)
    ip = found["status"]["podIP"]
    ctx = client_context(security, alpn=ALPN_HTTP, check_hostname=False)
    try:
        with urllib.request.urlopen(
            f"https://{ip}:{PORTS[kind]}/health", context=ctx, timeout=5
        ) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, ssl.SSLError, ConnectionError, TimeoutError):
        return False
