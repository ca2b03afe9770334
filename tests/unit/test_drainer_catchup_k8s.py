"""The drainer's catch-up on Kubernetes: ``[syncer.catchup.kubernetes]`` settings and their
validation, the job's command line they give, and stopping a job with a grace period (SIGTERM
first, then SIGKILL to its whole process group)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from typing import Any

import pytest

from services.drainer.catchup_job import K8S_STOP_GRACE, JobSpec, job_spec, run_job
from tests.support.waits import eventually
from tributary.config.drainer import DrainerConfig
from tributary.settings import SettingsError, load

K8S = "--syncer-catchup-kubernetes-"


def k8s_argv(tmp_path: Path, *more: str) -> list[str]:
    return [
        *("--data-dir", str(tmp_path), "--syncer-sink-uri", "mysql://root@127.0.0.1:3306/"),
        "--syncer-catchup-enabled",
        *("--syncer-catchup-staging-dir", "/staging/drainer-0"),
        f"{K8S}enabled",
        *(f"{K8S}namespace", "data", f"{K8S}image", "registry.local/tributary:1.0"),
        *(f"{K8S}staging-claim", "staging", f"{K8S}executors", "3"),
        *more,
    ]


def test_kubernetes_settings_give_a_client_mode_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "drainer-0")
    monkeypatch.setenv("POD_IP", "10.1.2.3")
    cfg = load(
        DrainerConfig,
        k8s_argv(tmp_path),
        {"DRAINER_SYNCER_CATCHUP_KUBERNETES_EXECUTOR_MEMORY": "2g"},
        "DRAINER",
    )
    c = cfg.syncer.catchup
    spec = job_spec(c, Path(cfg.catchup_staging()), "mysql://root@h:1/")
    assert spec.master == "k8s://https://kubernetes.default.svc"
    assert spec.stop_grace == K8S_STOP_GRACE > 0
    argv = spec.argv()
    opts = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert opts["--staging"] == "/staging/drainer-0"
    assert opts["--master"] == "k8s://https://kubernetes.default.svc"
    assert opts["--k8s-namespace"] == "data"
    assert opts["--k8s-image"] == "registry.local/tributary:1.0"
    assert opts["--k8s-driver-pod"] == "drainer-0"
    assert opts["--k8s-driver-host"] == "10.1.2.3"
    assert opts["--k8s-service-account"] == "tributary-spark"
    assert (opts["--k8s-staging-claim"], opts["--k8s-staging-mount"]) == ("staging", "/staging")
    assert (opts["--k8s-executors"], opts["--k8s-executor-memory"]) == ("3", "2g")
    assert "--k8s-ca-file" not in opts and "--k8s-token-file" not in opts  # in-cluster account
    assert "root@h" not in " ".join(argv)  # the sink stays in the environment

    # explicit pod name/IP and credentials (outside a pod) win over the downward API
    ca, token = tmp_path / "ca.crt", tmp_path / "token"
    ca.write_text("x")
    token.write_text("y")
    more = (f"{K8S}pod-name", "d1", f"{K8S}ca-file", str(ca), f"{K8S}token-file", str(token))
    cfg = load(DrainerConfig, k8s_argv(tmp_path, *more), {}, "DRAINER")
    argv = job_spec(cfg.syncer.catchup, Path("/staging/x"), "sqlite:///d").argv()
    opts = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert (opts["--k8s-driver-pod"], opts["--k8s-ca-file"]) == ("d1", str(ca))
    assert opts["--k8s-token-file"] == str(token)


def test_local_jobs_are_unchanged(tmp_path: Path) -> None:
    argv = ["--data-dir", str(tmp_path), "--syncer-sink-uri", "sqlite:///d.db"]
    cfg = load(DrainerConfig, [*argv, "--syncer-catchup-enabled"], {}, "DRAINER")
    spec = job_spec(cfg.syncer.catchup, tmp_path / "s", "sqlite:///d.db")
    assert (spec.master, spec.kubernetes, spec.stop_grace) == ("local[*]", None, 0.0)
    assert not any(a.startswith("--k8s") for a in spec.argv())


def test_kubernetes_settings_are_validated_all_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    monkeypatch.delenv("POD_IP", raising=False)
    argv = [
        *("--data-dir", str(tmp_path), "--syncer-sink-uri", "sqlite:///d.db"),
        "--syncer-catchup-enabled",
        f"{K8S}enabled",
        *(f"{K8S}api-server", "kubernetes.default.svc", f"{K8S}executor-memory", "lots"),
        *(f"{K8S}ca-file", str(tmp_path / "missing.crt"), f"{K8S}executors", "0"),
    ]
    with pytest.raises(SettingsError) as e:
        load(DrainerConfig, argv, {}, "DRAINER")
    text = str(e.value)
    for key in (
        "kubernetes.namespace",
        "kubernetes.image",
        "kubernetes.staging-claim",
        "kubernetes.api-server",
        "kubernetes.executor-memory",
        "kubernetes.executors",
        "kubernetes.ca-file",
        "kubernetes.pod-name",
        "kubernetes.pod-ip",
    ):
        assert f"syncer.catchup.{key}" in text, key
    # the default staging dir (<data-dir>/catchup) is not on the claim the executors mount
    assert "syncer.catchup.staging-dir" in text and "below" in text

    # off when catch-up is off
    off = [a for a in argv if a != "--syncer-catchup-enabled"]
    assert not load(DrainerConfig, off, {}, "DRAINER").syncer.catchup.enabled


def test_the_staging_dir_must_be_below_the_claims_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "drainer-0")
    monkeypatch.setenv("POD_IP", "10.1.2.3")
    for staging, ok in (("/staging/a/b", True), ("/staging", False), ("/stagingx/a", False)):
        argv = [*k8s_argv(tmp_path), "--syncer-catchup-staging-dir", staging]
        if ok:
            load(DrainerConfig, argv, {}, "DRAINER")
            continue
        with pytest.raises(SettingsError) as e:
            load(DrainerConfig, argv, {}, "DRAINER")
        assert "syncer.catchup.staging-dir" in str(e.value), staging


def fake_job(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fakepython"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def gone(pid: int) -> bool:
    """No such process, or a zombie (dead, waiting for whoever reaps orphans)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat_line.rpartition(")")[2].split()[0] == "Z"


async def test_a_cancelled_k8s_job_gets_sigterm_and_its_grace(tmp_path: Path) -> None:
    """The job stops itself on SIGTERM (as the real one stops its session) within the grace:
    it is not SIGKILLed, and what it started in its process group goes too."""
    mark = tmp_path / "terminated"
    python = fake_job(
        tmp_path,
        f"trap 'echo stopped > {mark}; exit 75' TERM\n"
        "sleep 60 >/dev/null & echo child $!\n"
        "while true; do sleep 0.05; done\n",
    )
    spec = JobSpec(tmp_path / "staging", "sqlite:///x", python=python, stop_grace=30.0)
    lines: list[dict[str, Any]] = []
    pids: list[int] = []
    task = asyncio.create_task(run_job(spec, pids.append, lines.append))
    await eventually(lambda: bool(lines))
    child = int(lines[0]["line"].split()[1])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert mark.read_text() == "stopped\n"  # SIGTERM reached it, and it had time to act
    assert gone(pids[0])
    await eventually(lambda: gone(child))  # its group was killed


async def test_a_job_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    python = fake_job(tmp_path, "trap '' TERM\necho started\nwhile true; do sleep 0.05; done\n")
    spec = JobSpec(tmp_path / "staging", "sqlite:///x", python=python, stop_grace=0.5)
    lines: list[dict[str, Any]] = []
    pids: list[int] = []
    task = asyncio.create_task(run_job(spec, pids.append, lines.append))
    await eventually(lambda: bool(lines))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(pids[0])
