"""Client mode on Kubernetes (the drainer's pod is the driver): the rendered Spark
configuration, the job CLI turning its ``--k8s-*`` options into it (and the executors' pod
template beside the staging directory), and SIGTERM stopping the session from its own thread."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import cast

import pytest
from pyspark.sql import SparkSession

from services.spark.catchup import _parse, spark_conf
from services.spark.errors import JobError
from services.spark.k8s import CONTAINER, IMAGE_JAR, K8sSubmission, client_conf, pod_template
from services.spark.terminate import StopOnSigterm

SUB = K8sSubmission(
    "https://10.0.0.1:6443",
    "data",
    "registry.local/tributary:1.0",
    staging_claim="staging",
    staging_mount="/var/lib/drainer/staging",
    executors=3,
    executor_cores=2,
    executor_memory="2g",
)


def test_client_conf_makes_the_drainer_pod_the_driver() -> None:
    conf = client_conf(SUB, driver_host="10.1.2.3", driver_pod="drainer-0", template_path="/t")
    assert conf["spark.master"] == "k8s://https://10.0.0.1:6443"
    assert conf["spark.submit.deployMode"] == "client"
    assert conf["spark.kubernetes.namespace"] == "data"
    assert conf["spark.kubernetes.container.image"] == "registry.local/tributary:1.0"
    assert conf["spark.kubernetes.executor.podTemplateFile"] == "/t"
    assert conf["spark.kubernetes.executor.podTemplateContainerName"] == CONTAINER
    assert conf["spark.kubernetes.driver.pod.name"] == "drainer-0"  # executors' owner
    # executors connect to the pod IP: Spark 4 advertises the bind address in k8s mode
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "10.1.2.3"
    assert (conf["spark.executor.instances"], conf["spark.executor.cores"]) == ("3", "2")
    assert conf["spark.executor.memory"] == "2g"
    assert conf["spark.executor.extraClassPath"] == IMAGE_JAR
    assert conf["spark.jars"] == f"local://{IMAGE_JAR}"
    assert conf["spark.kubernetes.driver.ownPersistentVolumeClaim"] == "false"
    assert not any(k.startswith("spark.kubernetes.authenticate") for k in conf)  # in-cluster
    assert not any("submission" in k or "driver.podTemplate" in k for k in conf)

    outside = K8sSubmission(
        "https://a:6443", "n", "i", submit_ca_file="/ca", submit_token_file="/token"
    )
    conf = client_conf(outside, driver_host="127.0.0.1", driver_pod="d", template_path="/t")
    # the keys client mode reads (cluster mode's spark-submit reads ...submission.*)
    assert conf["spark.kubernetes.authenticate.caCertFile"] == "/ca"
    assert conf["spark.kubernetes.authenticate.oauthTokenFile"] == "/token"


def test_the_template_mounts_the_claim_where_the_driver_sees_it() -> None:
    (container,) = pod_template(SUB)["spec"]["containers"]
    assert container["volumeMounts"] == [
        {"name": "staging", "mountPath": "/var/lib/drainer/staging"}
    ]


def k8s_args(staging: Path, *more: str) -> list[str]:
    return [
        *("--staging", str(staging), "--sink", "sqlite:///d.db"),
        *("--master", "k8s://https://10.0.0.1:6443", "--k8s-namespace", "data"),
        *("--k8s-image", "img:1", "--k8s-staging-claim", "staging"),
        *("--k8s-staging-mount", str(staging.parent), "--k8s-executors", "4"),
        *("--k8s-driver-pod", "drainer-0", "--k8s-driver-host", "10.1.2.3"),
        *more,
    ]


def test_the_job_cli_renders_client_conf_and_writes_the_template(tmp_path: Path) -> None:
    staging = tmp_path / "catchup"
    args = _parse(k8s_args(staging, "--conf", "spark.executor.instances=5", "--conf", "a.b=c=d"))
    conf = spark_conf(args)
    template = tmp_path / "catchup-executor-pod.json"
    assert conf["spark.kubernetes.executor.podTemplateFile"] == str(template)
    pod = json.loads(template.read_text())
    assert pod["spec"]["volumes"] == [
        {"name": "staging", "persistentVolumeClaim": {"claimName": "staging"}}
    ]
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == str(tmp_path)
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "catchup"
    assert conf["spark.kubernetes.driver.pod.name"] == "drainer-0"
    assert conf["spark.executor.instances"] == "5"  # --conf comes last
    assert conf["a.b"] == "c=d"


def test_the_job_cli_needs_the_pod_for_a_k8s_master(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_IP", raising=False)
    argv = [a for a in k8s_args(tmp_path / "s") if a not in ("--k8s-driver-host", "10.1.2.3")]
    with pytest.raises(JobError, match="POD_IP"):
        spark_conf(_parse(argv))
    monkeypatch.setenv("POD_IP", "10.9.9.9")  # the downward API's variable is the default
    assert spark_conf(_parse(argv))["spark.driver.host"] == "10.9.9.9"
    with pytest.raises(JobError, match="KEY=VALUE"):
        spark_conf(_parse([*k8s_args(tmp_path / "s"), "--conf", "novalue"]))


def test_a_local_master_gets_only_the_given_conf(tmp_path: Path) -> None:
    args = _parse(["--staging", str(tmp_path / "s"), "--master", "local[1]", "--conf", "x.y=1"])
    assert spark_conf(args) == {"x.y": "1"}
    assert list(tmp_path.iterdir()) == []  # no pod template


class FakeSession:
    """Stands in for a SparkSession: records the thread that stopped it."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.by: str = ""

    def stop(self) -> None:
        self.by = threading.current_thread().name
        self.stopped.set()


def test_sigterm_stops_the_session_from_the_watcher_thread() -> None:
    """The main thread is busy (as in a py4j call): the watcher stops the session anyway."""
    session, before = FakeSession(), signal.getsignal(signal.SIGTERM)
    with StopOnSigterm() as guard:
        assert not guard.attach(cast(SparkSession, session))
        os.kill(os.getpid(), signal.SIGTERM)
        assert session.stopped.wait(10)
        assert guard.requested.is_set() and session.by == "catchup-sigterm"
    assert signal.getsignal(signal.SIGTERM) is before  # restored


def test_sigterm_before_the_session_is_up_is_reported_by_attach() -> None:
    session = FakeSession()
    with StopOnSigterm() as guard:
        os.kill(os.getpid(), signal.SIGTERM)
        assert guard.requested.wait(10)
        assert guard.attach(cast(SparkSession, session))  # the caller stops it now
