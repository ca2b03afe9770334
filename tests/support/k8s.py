"""A real kube-apiserver (with its own etcd) on loopback, plus kubectl and helm, for tests.

The binaries come from ``make deps`` (scripts/k8s-binaries builds them from the Go module proxy
into a cache directory); a machine without them fails the tests at once.
Authentication is a static token file: ``admin`` (group system:masters) and one token per
service account the tests impersonate for real (``sa_tokens``), so RBAC is enforced
(``--authorization-mode=RBAC``). No kubelet, scheduler or controller-manager runs: pods stay
unscheduled and owner references are not garbage-collected; what is tested is API objects.

tests/k8s/conftest.py turns these into session fixtures: ``kube`` (a ``KubeApiServer``) and
``binlog_chart`` (the chart installed into it); each test works in its own namespace.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tests.support.certs import make_ca
from tests.support.components import component
from tests.support.etcd import run_etcd
from tests.support.net import free_port
from tests.support.procs import stop_process

REPO = Path(__file__).resolve().parents[2]
ADMIN_TOKEN = "admin-token-for-tests"
# service accounts the tests act as, with a token each: (namespace, name)
OPERATOR_SA = ("binlog-system", "binlog-operator")


class K8sUnavailable(RuntimeError):
    """This machine cannot run the Kubernetes tests (not root); the message says why."""


def binaries() -> Path:
    """The directory holding kube-apiserver, kubectl and helm (``make deps`` builds them)."""
    return component("kube-tools")


def sa_token(namespace: str, name: str) -> str:
    return f"sa-{namespace}-{name}-token"


class KubeTools:
    """kubectl and helm against one cluster: its kubeconfig, helm's homes under ``root``."""

    bin_dir: Path
    root: Path
    kubeconfig: Path
    tool_timeout: ClassVar[float] = 120  # s, the default bound of one kubectl/helm run

    def run(
        self,
        tool: str,
        *args: str,
        check: bool = True,
        input: str | None = None,
        kubeconfig: Path | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig or self.kubeconfig),
            "HELM_CACHE_HOME": str(self.root / "helm-cache"),
            "HELM_CONFIG_HOME": str(self.root / "helm-config"),
            "HELM_DATA_HOME": str(self.root / "helm-data"),
        }
        done = subprocess.run(
            [str(self.bin_dir / tool), *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=self.tool_timeout if timeout is None else timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{tool} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, **kw)

    def helm(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, **kw)

    def get(self, *args: str) -> Any:
        """``kubectl get ... -o json``, parsed; None if not found."""
        done = self.kubectl("get", *args, "-o", "json", "--ignore-not-found")
        return json.loads(done.stdout) if done.stdout.strip() else None


@dataclass
class KubeApiServer(KubeTools):
    url: str
    bin_dir: Path
    ca: Path
    kubeconfig: Path
    root: Path
    proc: subprocess.Popen[bytes]
    contexts: dict[str, Path] = field(default_factory=dict)

    def kubeconfig_for(self, token: str, name: str) -> Path:
        """A kubeconfig authenticating with ``token`` (a static token of this server)."""
        path = self.root / f"kubeconfig-{name}"
        path.write_text(_kubeconfig(self.url, self.ca, token))
        return path


def _kubeconfig(url: str, ca: Path, token: str) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "test", "cluster": {"server": url, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
        "current-context": "test",
    }
    return json.dumps(doc)


def _token_file(path: Path, service_accounts: Sequence[tuple[str, str]]) -> None:
    lines = [f'{ADMIN_TOKEN},admin,admin,"system:masters"']
    for ns, name in service_accounts:
        groups = f"system:serviceaccounts,system:serviceaccounts:{ns},system:authenticated"
        lines.append(f'{sa_token(ns, name)},system:serviceaccount:{ns}:{name},sa-{name},"{groups}"')
    path.write_text("\n".join(lines) + "\n")


def _wait_ready(url: str, ca: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(
        f"{url}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    deadline = time.monotonic() + 180
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"kube-apiserver exited {proc.returncode}: {log.read_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError) as e:
            last = repr(e)
        time.sleep(0.5)
    raise TimeoutError(f"kube-apiserver not ready ({last}): {log.read_text()[-3000:]}")


@contextmanager
def run_apiserver(root: Path, bin_dir: Path) -> Iterator[KubeApiServer]:
    root.mkdir(parents=True, exist_ok=True)
    ca = make_ca(root / "pki", name="kube-test-ca")
    serving = ca.issue("kube-apiserver", hosts=("127.0.0.1", "localhost"))
    sa_key = root / "pki" / "sa.key"
    subprocess.run(
        ["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True
    )
    tokens = root / "tokens.csv"
    _token_file(tokens, [OPERATOR_SA])
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    (root / "etcd").mkdir(exist_ok=True)
    with run_etcd(root / "etcd" / "data") as etcd:
        log = root / "kube-apiserver.log"
        out = open(log, "ab")
        proc = subprocess.Popen(
            [
                str(bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd.endpoint}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={ca.cert}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                f"--cert-dir={root / 'certs'}",
                "--v=0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        server = KubeApiServer(url, bin_dir, ca.cert, root / "kubeconfig", root, proc)
        server.kubeconfig.write_text(_kubeconfig(url, ca.cert, ADMIN_TOKEN))
        try:
            _wait_ready(url, ca.cert, proc, log)
            yield server
        finally:
            stop_process(proc, 30)


CHART = REPO / "helm" / "binlog-operator"
RELEASE = "binlog"


@dataclass
class InstalledChart:
    kube: KubeApiServer
    namespace: str
    operator_kubeconfig: Path  # authenticates as the chart's service account


def install_chart(kube: KubeApiServer) -> InstalledChart:
    """``helm install`` of the chart (CRDs, RBAC, operator Deployment) into the test server."""
    ns, sa = OPERATOR_SA
    kube.helm(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        ns,
        "--create-namespace",
        "--set",
        f"serviceAccount.name={sa}",
    )
    for plural in ("binlogclusters", "pumps", "drainers"):
        kube.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", f"crd/{plural}.binlog.io"
        )
    return InstalledChart(kube, ns, kube.kubeconfig_for(sa_token(ns, sa), "operator"))


@dataclass
class OperatorProcess:
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


@contextmanager
def run_operator(
    chart: InstalledChart, namespace: str, root: Path, env: dict[str, str] | None = None
) -> Iterator[OperatorProcess]:
    """``kopf run -m binlog_operator.handlers`` watching ``namespace``, authenticated as the
    chart's service account (so the chart's RBAC is what it gets)."""
    port = free_port()
    log = root / f"operator-{namespace}.log"
    out = open(log, "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kopf",
            "run",
            "-m",
            "binlog_operator.handlers",
            "--standalone",
            "--namespace",
            namespace,
            "--verbose",
            f"--liveness=http://127.0.0.1:{port}/healthz",
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env={
            **os.environ,
            "KUBECONFIG": str(chart.operator_kubeconfig),
            "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO)]),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        },
    )
    out.close()
    running = OperatorProcess(proc, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"operator exited {proc.returncode}: {running.output()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"operator not live: {running.output()}") from None
                time.sleep(0.3)
        yield running
    finally:
        stop_process(proc, 30)


def eventually(check: Any, what: str, within: float = 90.0, every: float = 0.5) -> Any:
    """Poll ``check()`` until it returns a truthy value; fail naming ``what``."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what} not reached within {within:.0f} s (last: {last!r})")


async def eventually_async(check: Any, what: str, within: float = 90.0, every: float = 0.5) -> Any:
    """``eventually`` for async tests: sleeps without blocking the event loop."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        await asyncio.sleep(every)
    raise AssertionError(f"{what} not reached within {within:.0f} s (last: {last!r})")
