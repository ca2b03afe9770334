"""BinlogCluster manifests applied to a real API server, the operator's fast settings, its events,
and the processes (drainers, etcd writes) that stand in for pods where no kubelet runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from services.demo.procs import free_port_pair
from tests.support.etcd import EtcdProcess
from tests.support.k8s import (
    REPO,
    KubeApiServer,
)

FAST = {
    "BINLOG_OPERATOR_STATUS_INTERVAL": "1",
    "BINLOG_OPERATOR_RETRY_DELAY": "1",
    "BINLOG_OPERATOR_OFFLINE_TIMEOUT": "60",
    "BINLOG_OPERATOR_DRAINER_CLOSE_TIMEOUT": "20",
}


def cluster(name: str, etcd: str, pumps: int, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "etcd": {"endpoints": [etcd]},
        "image": "tributary:test",
        "pumps": {"replicas": pumps, "storage": {"size": "1Gi"}},
        **extra,
    }
    return {
        "apiVersion": "binlog.io/v1alpha1",
        "kind": "BinlogCluster",
        "metadata": {"name": name},
        "spec": spec,
    }


def apply(kube: KubeApiServer, ns: str, obj: dict[str, Any]) -> None:
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(obj))


def etcdctl_put(etcd: EtcdProcess, key: str, value: str) -> None:
    etcdctl = Path(sys.executable).parent / "etcdctl"
    subprocess.run(
        [str(etcdctl), f"--endpoints={etcd.endpoint}", "put", key, value],
        check=True,
        capture_output=True,
    )


def start_drainer(
    root: Path, etcd: str, node_id: str, db: Path, *extra: str, port: int = 0
) -> subprocess.Popen[bytes]:
    """A drainer process: gRPC on ``port``, its HTTP API on ``port + 1``; returned once that
    answers, so it has taken its start ts (a write before that could fall below it)."""
    port = port or free_port_pair()
    log = open(root / f"{node_id}.log", "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.drainer",
            "--addr",
            f"127.0.0.1:{port}",
            "--status-addr",
            f"127.0.0.1:{port + 1}",
            "--data-dir",
            str(root / node_id),
            "--pd-urls",
            etcd,
            "--node-id",
            node_id,
            "--syncer-sink-uri",
            f"sqlite://{db}",
            "--checkpoint-interval",
            "0.3",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    log.close()
    _wait_http(proc, f"http://127.0.0.1:{port + 1}/health", root / f"{node_id}.log")
    return proc


def _wait_http(proc: subprocess.Popen[bytes], url: str, log: Path, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {within:.0f} s: {log.read_text()[-3000:]}")


def events(kube: KubeApiServer, ns: str, reason: str) -> list[dict[str, Any]]:
    """The namespace's events with ``reason``; [] when there are none (kubectl then prints
    nothing at all, as ``get`` answers for an empty list with ``--ignore-not-found``)."""
    found = kube.get("events", "-n", ns, "--field-selector", f"reason={reason}")
    items: list[dict[str, Any]] = found["items"] if found else []
    return items
