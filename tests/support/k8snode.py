"""The one-node cluster of ``scripts/k8s-node`` (pods really run) and the product image in it.

``prepare()`` builds what the node needs and is slow only the first time: the node's binaries
(``scripts/k8s-binaries`` and ``scripts/k8s-node-binaries``) and the product image
(``scripts/k8s-image``, from the Dockerfile, a docker-archive). ``run_node()`` brings the node
up with that image imported and takes it down again (no process, mount, veth, bridge or nftables
table left). tests/k8s/conftest.py runs ``prepare()`` at the end of collection (outside any test's
timeout) and offers the node as the session fixture ``kube_node``.

The node needs root, Debian's containerd/runc/CNI plugins/buildah/debootstrap (installed by the
scripts when missing) and Go for the first build; without root or Go the node tests skip with
the reason. One node per machine at a time: a lock file serialises concurrent test sessions.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

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
    seconds: dict[str, float]  # how long each build step took this time


def _script(name: str, timeout: float) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(SCRIPTS / name)], capture_output=True, text=True, timeout=timeout, env=env
    )
    if done.returncode != 0:  # a machine that cannot build is a failure, not a skip
        raise RuntimeError(f"scripts/{name} failed: {done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


def prepare() -> Prepared:
    """Build (or find cached) the binaries and the image; ``K8sUnavailable`` says why not here."""
    if os.geteuid() != 0:
        raise K8sUnavailable("the one-node cluster needs root (containerd, kubelet, a bridge)")
    if shutil.which("go") is None:
        for script in ("k8s-binaries", "k8s-node-binaries"):
            if subprocess.run([str(SCRIPTS / script), "--check"], capture_output=True).returncode:
                raise K8sUnavailable(f"no Go toolchain to build what scripts/{script} makes")
    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    bin_dir = Path(_script("k8s-binaries", 7200))
    _script("k8s-node-binaries", 7200)
    seconds["binaries"] = time.monotonic() - t0
    t0 = time.monotonic()
    image = Path(_script("k8s-image", 3600))
    seconds["image"] = time.monotonic() - t0
    return Prepared(bin_dir, (image,), seconds)


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
