"""Running one catch-up job as a subprocess and reading its progress.

The job is ``python -m services.spark.catchup`` (services never import each other: the drainer
only knows its command line, its JSON progress lines and its exit status). The sink URL goes in
the environment (``CATCHUP_SINK_URL``), never in argv, so a password does not show in ``ps``.
The job's stderr (Spark's log) goes to a file beside the staging directory.

With ``JobSpec.kubernetes`` the job's master is ``k8s://`` and its SparkSession is a
client-mode driver in this (the drainer's) process's pod: ``KubernetesJob.argv`` tells it the
executors' namespace, image, account and staging claim, and the pod's name and IP.

Invariant: the subprocess never outlives the call: a cancelled ``run_job`` stops it and waits
for it, so a drainer that stops mid-job leaves no Spark behind writing to its downstream. With
``stop_grace`` (k8s mode) the job first gets SIGTERM and that many seconds to stop its session
(Spark deletes its executor pods); then, or at once without a grace, its whole process group
(the job and its JVM) gets SIGKILL. The JVM shares the job's stdout, so the job counts as
ended only once both have exited.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tributary.config.drainer import CatchUpConfig, KubernetesCatchUpConfig
from tributary.servicekit.spawn import exited, reader, start

log = logging.getLogger(__name__)

SINK_ENV = "CATCHUP_SINK_URL"  # services.spark.catchup reads the sink URL from it
EXIT_RETRIABLE = 75  # the job's "a rerun may succeed"


K8S_STOP_GRACE = 20.0  # seconds a k8s job gets after SIGTERM to delete its executors


@dataclass(frozen=True)
class KubernetesJob:
    """Where a ``k8s://`` job's executors run and how its driver (this pod) is reached."""

    namespace: str
    image: str
    driver_pod: str  # this pod's name (downward API POD_NAME): the executors' owner
    driver_host: str  # this pod's IP (POD_IP): the executors connect back to it
    service_account: str = "tributary-spark"
    staging_claim: str = ""  # PVC the executors mount at staging_mount (= the drainer's path)
    staging_mount: str = "/staging"
    executors: int = 2
    executor_cores: int = 1
    executor_memory: str = "1g"
    ca_file: str = ""  # API server CA and token files; empty = the pod's service account
    token_file: str = ""

    def argv(self) -> list[str]:
        out = [
            *("--k8s-namespace", self.namespace, "--k8s-image", self.image),
            *("--k8s-driver-pod", self.driver_pod, "--k8s-driver-host", self.driver_host),
            *("--k8s-service-account", self.service_account),
            *("--k8s-staging-claim", self.staging_claim),
            *("--k8s-staging-mount", self.staging_mount),
            *("--k8s-executors", str(self.executors)),
            *("--k8s-executor-cores", str(self.executor_cores)),
            *("--k8s-executor-memory", self.executor_memory),
        ]
        if self.ca_file:
            out += ["--k8s-ca-file", self.ca_file]
        if self.token_file:
            out += ["--k8s-token-file", self.token_file]
        return out


@dataclass(frozen=True)
class JobSpec:
    staging: Path
    sink_url: str
    master: str = "local[*]"
    partitions: int = 4
    driver_memory: str = "1g"
    python: str = sys.executable
    kubernetes: KubernetesJob | None = None  # set: master is k8s://<API server>
    stop_grace: float = 0.0  # seconds between SIGTERM and SIGKILL when the job is stopped

    def argv(self) -> list[str]:
        return [
            self.python,
            *("-m", "services.spark.catchup"),
            *("--staging", str(self.staging)),
            *("--master", self.master),
            *("--partitions", str(self.partitions)),
            *("--driver-memory", self.driver_memory),
            *(self.kubernetes.argv() if self.kubernetes is not None else ()),
        ]

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, SINK_ENV: self.sink_url}

    @property
    def log_path(self) -> Path:
        return self.staging.with_name(self.staging.name + "-job.log")


def kubernetes_job(k8s: KubernetesCatchUpConfig) -> KubernetesJob:
    """The k8s job ``[syncer.catchup.kubernetes]`` describes, its driver this pod."""
    return KubernetesJob(
        k8s.namespace,
        k8s.image,
        k8s.driver_pod(),
        k8s.driver_host(),
        service_account=k8s.service_account,
        staging_claim=k8s.staging_claim,
        staging_mount=k8s.staging_mount,
        executors=k8s.executors,
        executor_cores=k8s.executor_cores,
        executor_memory=k8s.executor_memory,
        ca_file=k8s.ca_file,
        token_file=k8s.token_file,
    )


def job_spec(c: CatchUpConfig, staging: Path, sink_url: str) -> JobSpec:
    """The job ``[syncer.catchup]`` describes: local (``master``) or, with ``[kubernetes]
    enabled``, on Kubernetes."""
    k8s = c.kubernetes
    return JobSpec(
        staging,
        sink_url,
        master=k8s.master if k8s.enabled else c.master,
        partitions=c.partitions,
        driver_memory=c.driver_memory,
        kubernetes=kubernetes_job(k8s) if k8s.enabled else None,
        stop_grace=K8S_STOP_GRACE if k8s.enabled else 0.0,
    )


def retriable_exit(code: int) -> bool:
    """Exit 75 (the job says a rerun may help) or killed by a signal (negative code)."""
    return code == EXIT_RETRIABLE or code < 0


def parse_line(raw: bytes) -> dict[str, Any]:
    """One stdout line as a JSON object; anything else is kept as ``{"line": text}``."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return {"line": text}
    return value if isinstance(value, dict) else {"line": text}


class JobRunner(Protocol):
    async def __call__(
        self,
        spec: JobSpec,
        on_start: Callable[[int], None],
        on_line: Callable[[dict[str, Any]], None],
    ) -> int: ...


async def run_job(
    spec: JobSpec,
    on_start: Callable[[int], None],
    on_line: Callable[[dict[str, Any]], None],
    *,
    extra_argv: Sequence[str] = (),
) -> int:
    """Run the job to its end; its exit status (negative: killed by that signal)."""
    err = await asyncio.to_thread(open, spec.log_path, "ab")
    try:  # not create_subprocess_exec: see tributary.servicekit.spawn
        proc = start(
            [*spec.argv(), *extra_argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=spec.env(os.environ),
            start_new_session=True,  # its own process group: the JVM goes with it
        )
    finally:
        err.close()
    log.info("catch-up job started (pid %d, log %s)", proc.pid, spec.log_path)
    on_start(proc.pid)
    try:
        assert proc.stdout is not None
        stdout, transport = await reader(proc.stdout)
        try:
            async for raw in stdout:
                if raw.strip():
                    on_line(parse_line(raw))
        finally:
            transport.close()
        return await exited(proc)
    finally:
        await _stop(proc, spec.stop_grace)


async def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """End the job's process group (the job and its JVM): SIGTERM and up to ``grace`` seconds
    for the job to stop its session, then SIGKILL to whatever is left."""
    if proc.poll() is not None:
        return  # it ended by itself
    if grace > 0:
        proc.terminate()
        log.warning("catch-up job %d stopping: the drainer is stopping", proc.pid)
        try:
            async with asyncio.timeout(grace):
                await exited(proc)
        except TimeoutError:
            log.warning("catch-up job %d did not stop within %.0f s", proc.pid, grace)
        except asyncio.CancelledError:  # cancelled again: no more waiting
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group may outlive its leader (the JVM)
    except ProcessLookupError:
        pass
    await exited(proc)
    log.warning("catch-up job %d ended (%s): the drainer is stopping", proc.pid, proc.returncode)
