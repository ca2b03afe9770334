"""The drainer's catch-up on Spark-on-Kubernetes (client mode) against a real kube-apiserver:
a real drainer process with a backlog in a real pump stages the range and runs the job, whose
SparkSession (the driver, in the drainer's "pod") creates executor pods through the API server
as the chart's Spark service account; stopping the drainer stops the job, Spark deletes its
executors, and the downstream checkpoint has not moved.

No kubelet runs: the executor pods stay Pending, so the job waits for executors until it is
stopped. The drainer's pod is a Pod object created first (Spark reads it at start and makes it
the executors' owner); the drainer itself runs on this machine with POD_NAME / POD_IP set as the
downward API would, and the staging "claim" is a directory at the path its mount would have.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from services.spark.k8s import CONTAINER
from tests.support.k8s import RELEASE, InstalledChart, KubeApiServer, eventually_async
from tests.support.k8s_spark import SPARK_SA, as_spark_sa, items, spark_rbac
from tests.support.pipeline import ORDERS, commit, ddl, row, running_pipeline
from tributary.ddlhistory import Action
from tributary.image import IMAGE_UID
from tributary.sinks.checkpoint import CheckpointRecord, checkpoint_load
from tributary.sql import SQLITE

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(300)]

IMAGE = "registry.local/tributary:1.0"
NS = "drainer-spark"
POD = "drainer-0"
LAG = 3.0  # seconds behind that start a catch-up
ROWS = 20


def apply(kube: KubeApiServer, doc: dict[str, Any], path: Path) -> dict[str, Any]:
    path.write_text(json.dumps(doc))
    done = kube.kubectl("create", "-f", str(path), "-o", "json")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def prepare_namespace(kube: KubeApiServer, root: Path) -> tuple[str, Path]:
    """The namespace with the chart's Spark RBAC, the drainer's Pod and the staging claim; the
    drainer pod's uid and a token file of the Spark service account."""
    kube.kubectl("create", "namespace", NS)
    docs = spark_rbac(kube, RELEASE, f"spark.namespaces={{{NS}}}")
    rbac = root / "spark-rbac.json"
    rbac.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    kube.kubectl("apply", "-f", str(rbac))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NS, "labels": {"app": "drainer"}},
        "spec": {
            "serviceAccountName": SPARK_SA,
            "containers": [{"name": "drainer", "image": IMAGE}],
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "staging", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    uid = apply(kube, pod, root / "pod.json")["metadata"]["uid"]
    # running and ready, as a kubelet would report it (Spark waits briefly for its readiness)
    ready = [{"type": t, "status": "True"} for t in ("Ready", "ContainersReady")]
    status = {"phase": "Running", "podIP": "127.0.0.1", "conditions": ready}
    kube.kubectl(
        "patch", "pod", POD, "-n", NS, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip
    apply(kube, claim, root / "claim.json")
    return uid, as_spark_sa(kube, NS, root).token_file


def flags(initial: int, kube: KubeApiServer, token: Path, claim: Path) -> list[str]:
    k8s = "--syncer-catchup-kubernetes-"
    return [
        *("--initial-commit-ts", str(initial), "--syncer-catchup-enabled"),
        *("--syncer-catchup-lag-threshold", str(LAG), "--syncer-catchup-resume-lag", "1"),
        *("--syncer-catchup-idle", "2", "--syncer-catchup-retries", "0"),
        *("--syncer-catchup-partitions", "1", "--syncer-catchup-driver-memory", "512m"),
        *("--syncer-catchup-staging-dir", str(claim / "catchup")),
        f"{k8s}enabled",
        *(f"{k8s}api-server", kube.url, f"{k8s}namespace", NS, f"{k8s}image", IMAGE),
        *(f"{k8s}staging-claim", "staging", f"{k8s}staging-mount", str(claim)),
        *(f"{k8s}executors", "2", f"{k8s}executor-memory", "512m"),
        *(f"{k8s}ca-file", str(kube.ca), f"{k8s}token-file", str(token)),
    ]


def checkpoint(db: Path, cluster_id: int) -> int | None:
    with sqlite3.connect(db) as conn:
        stmt = checkpoint_load(SQLITE, cluster_id)
        found = conn.execute(stmt.sql, stmt.args).fetchone()
    return None if found is None else CheckpointRecord.from_json(found[0]).commit_ts


def executors(kube: KubeApiServer) -> list[Any]:
    return items(kube, "pods", "-n", NS, "-l", "spark-role=executor")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_drainer_runs_its_catch_up_on_kubernetes_and_stops_it(
    binlog_chart: InstalledChart, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube = binlog_chart.kube
    drainer_uid, token = await asyncio.to_thread(prepare_namespace, kube, tmp_path)
    claim, down = tmp_path / "claim", tmp_path / "down.db"
    claim.mkdir()
    # the drainer's pod as the downward API describes it; only the given token authenticates
    monkeypatch.setenv("POD_NAME", POD)
    monkeypatch.setenv("POD_IP", "127.0.0.1")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    async with running_pipeline(tmp_path, pumps=1) as pipe, aiohttp.ClientSession() as http:
        initial = await pipe.tso.get_ts()
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        backlog = [await commit(pipe, row(ORDERS.id, version, rid)) for rid in range(ROWS)]
        await asyncio.sleep(LAG + 0.5)  # the backlog is LAG behind when the drainer comes
        drainer = await pipe.cluster.start_drainer(
            f"sqlite://{down}", extra=flags(initial, kube, token, claim)
        )

        async def catchup() -> dict[str, Any]:
            async with http.get(f"{drainer.status_url}/status") as resp:
                body: dict[str, Any] = await resp.json()
            return body["CatchUp"]  # type: ignore[no-any-return]

        async def session_started() -> dict[str, Any] | None:
            s = await catchup()
            sessions = [p for p in s["progress"] if p.get("phase") == "session"]
            return s if s["state"] == "running" and s["pid"] and sessions else None

        # the DDLs streamed, the rows were staged, the job runs as a k8s client-mode driver
        status = await eventually_async_result(session_started, "the job's session", 180)
        assert status["rows"] == ROWS and status["end_ts"] >= backlog[-1]
        assert (claim / "catchup" / "range.json").is_file()
        (session,) = [p for p in status["progress"] if p.get("phase") == "session"]
        assert session["master"] == f"k8s://{kube.url}"
        start, pid = status["start_ts"], status["pid"]
        assert checkpoint(down, pipe.cluster_id) == start

        # its executors: the image, the account, the claim at the drainer's path, owned by
        # the drainer's pod
        pods = await eventually_async(
            lambda: len(found := executors(kube)) == 2 and found, "two executor pods", 120
        )
        for pod in pods:
            meta, spec = pod["metadata"], pod["spec"]
            assert meta["labels"]["spark-app-selector"] == session["app_id"]
            assert meta["labels"]["app.kubernetes.io/name"] == "tributary-spark"
            assert meta["labels"]["app.kubernetes.io/component"] == "catchup"
            assert meta["ownerReferences"] == [
                {"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": drainer_uid,
                 "controller": True}
            ]  # fmt: skip
            assert spec["serviceAccountName"] == SPARK_SA
            assert spec["securityContext"]["runAsUser"] == IMAGE_UID
            (c,) = [c for c in spec["containers"] if c["name"] == CONTAINER]
            assert c["image"] == IMAGE
            assert {"name": "staging", "mountPath": str(claim)} in c["volumeMounts"]
            volumes = {v["name"]: v for v in spec["volumes"]}
            assert volumes["staging"]["persistentVolumeClaim"] == {"claimName": "staging"}
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["SPARK_DRIVER_URL"].startswith("spark://CoarseGrainedScheduler@127.0.0.1:")
        assert (await catchup())["state"] == "running"  # still waiting for its executors

        # the drainer stops: the job is stopped, Spark deletes its executors, nothing applied
        assert await drainer.child.stop(90) == 0
        assert not alive(pid)
        await eventually_async(lambda: executors(kube) == [], "the executors deleted", 30)
        assert checkpoint(down, pipe.cluster_id) == start
        with sqlite3.connect(down) as db:
            assert db.execute('SELECT COUNT(*) FROM "shop__orders"').fetchone() == (0,)
        log = (claim / "catchup-job.log").read_text(errors="replace")
        assert "SIGTERM: stopping the Spark session" in log
        assert "Invoking stop() from shutdown hook" not in log, "stopped by the job, not the JVM"
        assert "forbidden" not in log  # every call Spark made was within DRIVER_RBAC


async def eventually_async_result(check: Any, what: str, within: float) -> dict[str, Any]:
    """Await ``check()`` until it returns a value; fail naming ``what``."""
    deadline = asyncio.get_running_loop().time() + within
    last: Any = None
    while asyncio.get_running_loop().time() < deadline:
        last = await check()
        if last:
            return last  # type: ignore[no-any-return]
        await asyncio.sleep(0.5)
    raise AssertionError(f"{what} not reached within {within:.0f} s (last: {last!r})")
