"""Watching a rolling update on the one-node cluster (``kube_node``): a second image imported, a
bank workload left running while it happens and stopped afterwards, and a sampler recording what
the roll looked like from outside (the ``Upgrading`` condition, the versions ``kubectl get bc``
shows, the pumps' registry states, the drainer's lag)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.k8snode import SCRIPTS, KubeNode, wait_pod_phase
from tests.support.k8snode_cluster import ETCD, etcd_nodes, run_pod, table


def import_archive(archive: Path) -> float:
    """``scripts/k8s-node import ARCHIVE`` into the running node; the seconds it took."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    began = time.monotonic()
    done = subprocess.run(
        [str(SCRIPTS / "k8s-node"), "import", str(archive)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return time.monotonic() - began


def start_bank(
    node: KubeNode, ns: str, name: str, upstream: Path, seconds: int, seed: int, rate: float = 20
) -> None:
    """``binlog-workload`` (bank) in a pod for at most ``seconds``, paced at ``rate``
    transactions a second, not waited for."""
    run_pod(
        node,
        ns,
        name,
        ["binlog-workload", "--kind", "bank", "--upstream", "sqlite:///upstream/up.db",
         "--pd-urls", ETCD, "--duration", str(seconds), "--rate", str(rate), "--writers", "4",
         "--seed", str(seed), "--accounts", "50"],
        restartPolicy="Never",
        mounts=[{"name": "upstream", "mountPath": "/upstream"}],
        volumes=[{"name": "upstream", "hostPath": {"path": str(upstream), "type": "Directory"}}],
    )  # fmt: skip
    wait_pod_phase(node, ns, name, {"Running"}, within=180)


def stop_bank(node: KubeNode, ns: str, name: str) -> dict[str, int]:
    """SIGTERM to the workload (it stops between transactions), then its counters."""
    kill = "import os, signal; os.kill(1, signal.SIGTERM)"
    node.kubectl("exec", name, "-n", ns, "--", "python", "-c", kill, check=False)
    pod = wait_pod_phase(node, ns, name, {"Succeeded", "Failed"}, within=180)
    logs = node.kubectl("logs", name, "-n", ns).stdout
    assert pod["status"]["phase"] == "Succeeded", logs[-4000:]
    lines = [ln for ln in logs.splitlines() if ln.startswith("{") and '"commits"' in ln]
    assert lines, logs[-4000:]
    stats: dict[str, int] = json.loads(lines[-1])
    return stats


def pod_uids(node: KubeNode, ns: str, selector: str) -> dict[str, str]:
    pods = node.get("pods", "-n", ns, "-l", selector) or {"items": []}
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods["items"]}


def condition(body: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    found = ((body or {}).get("status") or {}).get("conditions") or []
    return next((c for c in found if c.get("type") == type_), {})


def stamp(text: str) -> float:
    """An RFC 3339 time of the API server as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class RollWatch:
    """Samples of one roll, taken with ``sample()`` until ``done`` says it finished."""

    node: KubeNode
    ns: str
    cluster: str
    began: float = field(default_factory=time.time)
    messages: list[str] = field(default_factory=list)  # distinct Upgrading messages, in order
    versions: list[str] = field(default_factory=list)  # distinct PUMP/DRAINER VERSION cells
    lag_peak: float = 0.0  # s, the drainer's checkpoint behind the wall clock
    pump_phase_lag_peak: float = 0.0  # the same, before the roll reached a drainer
    most_pumps_down: int = 0  # pumps not online in the registry at once
    samples: int = 0

    def sample(self) -> dict[str, Any] | None:
        """One look; the BinlogCluster as read."""
        self.samples += 1
        body = self.node.get("bc", self.cluster, "-n", self.ns)
        upgrading = condition(body, "Upgrading")
        if upgrading.get("status") == "True" and upgrading.get("message") not in self.messages:
            self.messages.append(str(upgrading.get("message")))
        pump_phase = not any("drainer-" in m.partition("waiting for ")[2] for m in self.messages)
        for row in table(self.node, self.ns, "bc"):
            cell = f"{row.get('PUMP VERSION')} / {row.get('DRAINER VERSION')}"
            if cell not in self.versions:
                self.versions.append(cell)
        pumps = etcd_nodes(self.node, "pumps")
        down = sum(1 for p in pumps.values() if p.get("state") != "online")
        self.most_pumps_down = max(self.most_pumps_down, down)
        for drainer in etcd_nodes(self.node, "drainers").values():
            checkpoint = int(drainer.get("maxCommitTS", 0))
            if checkpoint and drainer.get("state") == "online":
                lag = time.time() - (checkpoint >> 18) / 1000
                self.lag_peak = max(self.lag_peak, lag)
                if pump_phase:
                    self.pump_phase_lag_peak = max(self.pump_phase_lag_peak, lag)
        return body

    def until(self, done: Any, what: str, within: float, every: float = 2.0) -> Any:
        """Sample until ``done(body)`` is truthy; its value. Fails with the last messages."""
        deadline = time.monotonic() + within
        body = None
        while time.monotonic() < deadline:
            body = self.sample()
            result = done(body)
            if result:
                return result
            time.sleep(every)
        raise AssertionError(
            f"{what} not within {within:.0f} s; Upgrading said: {self.messages[-5:]}; "
            f"conditions: {((body or {}).get('status') or {}).get('conditions')}"
        )
