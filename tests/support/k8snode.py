"""The one-node cluster of ``scripts/k8s-node`` (pods really run) and the product image in it.

``prepare()`` looks up what the node needs, all of it prepared by ``make deps``: the node's
binaries (scripts/k8s-binaries and scripts/k8s-node-binaries), the pause image and the product
image of the current tree (scripts/k8s-image, from the Dockerfile, a docker-archive); a missing
one fails the test at once. ``run_node()`` brings the node up with that image imported and takes
it down again (no process, mount, veth, bridge or nftables table left). tests/k8s/conftest.py
offers the node as the session fixture ``kube_node``.

The node needs root (without it the node tests skip with the reason) and Debian's
containerd/runc/CNI plugins (``make deps``). One node per machine at a time: a lock file
serialises concurrent test sessions.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tests.support.components import component
from tests.support.k8s import K8sUnavailable, KubeTools

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
RUN = Path(os.environ.get("TRIBUTARY_K8S_RUN", "/tmp/tributary-k8s"))
LOCK = Path("/tmp/tributary-k8s-node.lock")
CHART_APP_VERSION = "0.1.0"
IMAGE = f"docker.io/library/tributary:{CHART_APP_VERSION}"


@dataclass(frozen=True)
class Prepared:
    bin_dir: Path  # kubectl and helm
    images: tuple[Path, ...]  # docker-archives to import


def prepare() -> Prepared:
    """Look up the binaries, the pause image and the product image of the current tree (``make
    deps`` builds them); ``K8sUnavailable`` says why this machine cannot run the node."""
    if os.geteuid() != 0:
        raise K8sUnavailable("the one-node cluster needs root (containerd, kubelet, a bridge)")
    for name in (
        "containerd",
        "runc",
        "containernetworking-plugins",
        "kube-node-tools",
        "pause-image",
    ):
        component(name)  # scripts/k8s-node up looks them up too; here they fail the test at once
    return Prepared(component("kube-tools"), (component("image"),))


@dataclass
class KubeNode(KubeTools):
    """The running node: kubectl/helm against it as its admin."""

    kubeconfig: Path
    bin_dir: Path
    root: Path  # the test session's scratch directory (helm's homes)
    image: str = IMAGE
    tool_timeout: ClassVar[float] = 180


def _node_script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [str(SCRIPTS / "k8s-node"), *args], capture_output=True, text=True, env=env, timeout=timeout
    )


@contextmanager
def run_node(prepared: Prepared, root: Path) -> Iterator[KubeNode]:
    """``scripts/k8s-node up`` with the prepared images imported; ``down`` on exit."""
    root.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one node per machine: wait for another session's
        _node_script("down", timeout=300)  # what a killed session may have left
        up = _node_script("up", *map(str, prepared.images), timeout=900)
        if up.returncode != 0:
            raise RuntimeError(f"scripts/k8s-node up failed:\n{up.stderr[-6000:]}")
        try:
            yield KubeNode(Path(up.stdout.strip().splitlines()[-1]), prepared.bin_dir, root)
        finally:
            down = _node_script("down", timeout=300)
            if down.returncode != 0:
                raise RuntimeError(f"scripts/k8s-node down failed:\n{down.stderr[-4000:]}")


def wait_pod_phase(node: KubeNode, ns: str, pod: str, phases: set[str], within: float) -> Any:
    """The pod once its phase is one of ``phases``; fail with its description otherwise."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = node.get("pod", pod, "-n", ns)
        if last and last.get("status", {}).get("phase") in phases:
            return last
        time.sleep(1)
    described = node.kubectl("describe", "pod", pod, "-n", ns, check=False).stdout
    raise AssertionError(f"pod {ns}/{pod} not {sorted(phases)} within {within:.0f} s:\n{described}")
