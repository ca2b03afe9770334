"""A drainer's Spark catch-up in the BinlogCluster spec: parsing, the drainer pod it needs on
Kubernetes, and a rendered drainer.toml the drainer's own settings loader accepts; and the
bounded closing of a deleted cluster's drainers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlog_operator.configs import check_all, check_drainer, drainer_toml
from binlog_operator.manifests import build
from binlog_operator.options import from_env
from binlog_operator.scaledown import ScaleDownError
from binlog_operator.spec import CatchUpSpec, SpecError, parse
from binlog_operator.teardown import close_within
from services.drainer.catchup_job import job_spec
from tributary.config.drainer import DrainerConfig
from tributary.image import IMAGE_UID
from tributary.settings import SettingsError, load

ETCD = {"endpoints": ["http://etcd-0:2379"]}
K8S = {"kubernetes": True, "stagingClaim": "shared-staging"}


def raw(catchup: Any, sink: str = "mysql://root@db:3306/", **drainer: Any) -> dict[str, Any]:
    d = {"name": "down", "sinkURI": sink, "catchup": catchup, **drainer}
    return {"etcd": ETCD, "image": "reg/tributary:1.2", "drainers": [d]}


def objects(spec_raw: dict[str, Any]) -> dict[tuple[str, str], Any]:
    built = build("c1", "ns1", "uid-1", parse(spec_raw), 1)
    return {(o["kind"], o["metadata"]["name"]): o for o in built}


def test_a_kubernetes_catch_up_gets_the_documented_defaults() -> None:
    (d,) = parse(raw(K8S)).drainers
    assert d.catchup == CatchUpSpec(
        kubernetes=True,
        staging_claim="shared-staging",
        staging_mount="/staging",
        service_account="tributary-spark",  # the chart's Spark account
        executors=2,
        executor_cores=1,
        executor_memory="1g",
    )
    # the operator's configured account is the default; the spec's own wins
    (d,) = parse(raw(K8S), spark_account="spark-x").drainers
    assert d.catchup is not None and d.catchup.service_account == "spark-x"
    mine = {**K8S, "serviceAccount": "mine", "stagingMount": "/mnt/stage/", "executors": 4}
    (d,) = parse(raw(mine), spark_account="spark-x").drainers
    assert d.catchup is not None
    assert (d.catchup.service_account, d.catchup.staging_mount, d.catchup.executors) == (
        "mine",
        "/mnt/stage",
        4,
    )
    (d,) = parse(raw({})).drainers  # local[*] in the drainer's pod
    assert d.catchup == CatchUpSpec(kubernetes=False)
    (d,) = parse(raw(None)).drainers
    assert d.catchup is None


def test_every_catch_up_problem_is_reported_at_once() -> None:
    bad = {
        "kubernetes": True,
        "stagingMount": "/var/lib/binlog/stage",
        "executors": 0,
        "executorCores": True,
        "executorMemory": "2GB",
        "serviceAccount": "Not_A_Name",
    }
    with pytest.raises(SpecError) as caught:
        parse(raw(bad))
    where = "drainers[0].catchup"
    assert caught.value.problems == [
        f"{where}.stagingClaim: required with kubernetes: true (an existing ReadWriteMany "
        "PersistentVolumeClaim the drainer and the executor pods both mount)",
        f"{where}.stagingMount: '/var/lib/binlog/stage' overlaps the drainer's own mounts "
        "(/etc/binlog, /var/lib/binlog)",
        f"{where}.serviceAccount: 'Not_A_Name' is not a ServiceAccount name",
        f"{where}.executorMemory: '2GB' must be a JVM size such as 2g",
        f"{where}.executors: 0 must be an integer of at least 1",
        f"{where}.executorCores: True must be an integer of at least 1",
    ]
    for mount in ("staging", "/", "/etc", "/a/../b"):
        with pytest.raises(SpecError, match="stagingMount"):
            parse(raw({**K8S, "stagingMount": mount}))
    with pytest.raises(SpecError) as caught:
        parse(raw({"stagingClaim": "x", "executors": 3}))
    assert caught.value.problems == [
        f"{where}.stagingClaim: only used with kubernetes: true (the job's executors as pods)",
        f"{where}.executors: only used with kubernetes: true (the job's executors as pods)",
    ]
    with pytest.raises(SpecError, match=r"catchup\.kubernetes: 'yes' must be true or false"):
        parse(raw({"kubernetes": "yes"}))
    with pytest.raises(SpecError, match="catchup: must be an object"):
        parse(raw("on"))


def test_the_drainer_pod_runs_as_the_spark_account_with_the_claim_and_its_own_address() -> None:
    objs = objects(raw(K8S))
    pod = objs[("StatefulSet", "c1-drainer-down")]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "tributary-spark"
    assert pod["securityContext"] == {"fsGroup": IMAGE_UID}  # the claim writable by the image
    assert {"name": "staging", "persistentVolumeClaim": {"claimName": "shared-staging"}} in pod[
        "volumes"
    ]
    (c,) = pod["containers"]
    assert {"name": "staging", "mountPath": "/staging"} in c["volumeMounts"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env == {
        "POD_NAME": "metadata.name",
        "NAMESPACE": "metadata.namespace",
        "POD_IP": ("status.podIP"),
    }
    # pumps and a drainer without it keep the namespace's default account and no extra volume
    plain = objects(raw(None))
    for sts in ("c1-pump", "c1-drainer-down"):
        spec = plain[("StatefulSet", sts)]["spec"]["template"]["spec"]
        assert "serviceAccountName" not in spec and "securityContext" not in spec
        assert all(v["name"] != "staging" for v in spec["volumes"])
        assert {e["name"] for e in spec["containers"][0]["env"]} == {"POD_NAME", "NAMESPACE"}
    local = objects(raw({}))[("StatefulSet", "c1-drainer-down")]["spec"]["template"]["spec"]
    assert "serviceAccountName" not in local


def test_the_rendered_config_loads_as_the_drainer_in_its_pod_would_load_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ConfigMap's TOML with the StatefulSet's args and the downward API's environment."""
    objs = objects(raw({**K8S, "executors": 3, "executorMemory": "2g"}))
    text = objs[("ConfigMap", "c1-drainer-down")]["data"]["drainer.toml"]
    (c,) = objs[("StatefulSet", "c1-drainer-down")]["spec"]["template"]["spec"]["containers"]
    pod_env = {"POD_NAME": "c1-drainer-down-0", "NAMESPACE": "ns1", "POD_IP": "10.1.2.3"}
    for k, v in pod_env.items():
        monkeypatch.setenv(k, v)
    config = tmp_path / "drainer.toml"
    config.write_text(text)
    args = []
    for a in c["args"]:
        for k, v in pod_env.items():
            a = a.replace(f"$({k})", v)
        args.append(str(config) if a == "/etc/binlog/drainer.toml" else a)
    cfg = load(DrainerConfig, args, pod_env, "DRAINER")
    catchup = cfg.syncer.catchup
    assert catchup.enabled and catchup.kubernetes.enabled
    assert catchup.staging_dir == "/staging/c1-drainer-down/catchup"
    job = job_spec(catchup, Path(catchup.staging_dir), cfg.syncer.sink_url(cfg.data_dir))
    assert job.master == "k8s://https://kubernetes.default.svc"
    assert job.kubernetes is not None
    k8s = job.kubernetes
    assert (k8s.namespace, k8s.image, k8s.service_account) == (
        "ns1",
        "reg/tributary:1.2",
        "tributary-spark",
    )
    assert (k8s.staging_claim, k8s.staging_mount) == ("shared-staging", "/staging")
    assert (k8s.executors, k8s.executor_cores, k8s.executor_memory) == (3, 1, "2g")
    assert (k8s.driver_pod, k8s.driver_host) == ("c1-drainer-down-0", "10.1.2.3")
    # the operator's own check accepts it without the pod's environment
    monkeypatch.delenv("POD_NAME")
    monkeypatch.delenv("POD_IP")
    check_drainer(text, "down")
    check_all(parse(raw(K8S)), "c1", "ns1")


def test_without_the_pod_address_the_drainer_would_refuse_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why the pod needs POD_IP: the same config without it is refused by the drainer."""
    monkeypatch.delenv("POD_IP", raising=False)
    monkeypatch.setenv("POD_NAME", "c1-drainer-down-0")
    spec = parse(raw(K8S))
    config = tmp_path / "drainer.toml"
    config.write_text(drainer_toml(spec, spec.drainers[0], "c1", "ns1"))
    with pytest.raises(SettingsError, match="POD_IP"):
        load(DrainerConfig, ["--config", str(config), "--node-id", "x"], {}, "DRAINER")


def test_catch_up_keys_in_config_are_kept_unless_the_catch_up_sets_them() -> None:
    tuned = {"syncer": {"catchup": {"lag-threshold": "10m", "max-range-rows": 5000}}}
    spec = parse(raw(K8S, config=tuned))
    cfg = check_drainer(drainer_toml(spec, spec.drainers[0], "c1", "ns1"), "down")
    assert cfg.syncer.catchup.lag_threshold == 600.0
    assert cfg.syncer.catchup.max_range_rows == 5000
    clash = {"syncer": {"catchup": {"staging-dir": "/x", "kubernetes": {"executors": 9}}}}
    spec = parse(raw(K8S, config=clash))
    with pytest.raises(SpecError) as caught:
        drainer_toml(spec, spec.drainers[0], "c1", "ns1")
    assert caught.value.problems == [
        "drainers[down].config.syncer.catchup.kubernetes: set by drainers[down].catchup, remove it",
        "drainers[down].config.syncer.catchup.staging-dir: set by drainers[down].catchup, "
        "remove it",
    ]
    # a local catch-up manages only "enabled": the staging directory stays the user's to set
    spec = parse(raw({}, config={"syncer": {"catchup": {"staging-dir": "/var/lib/binlog/s"}}}))
    cfg = check_drainer(drainer_toml(spec, spec.drainers[0], "c1", "ns1"), "down")
    assert cfg.syncer.catchup.enabled and not cfg.syncer.catchup.kubernetes.enabled
    assert cfg.syncer.catchup.staging_dir == "/var/lib/binlog/s"


def test_a_catch_up_into_a_sink_it_cannot_write_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"drainers\[down\]\.config: .*catch-up writes mysql"):
        check_all(parse(raw(K8S, sink="file:///out")), "c1", "ns1")


def test_operator_options_for_the_spark_account_and_the_drainer_close_budget() -> None:
    assert from_env({}).spark_account == "tributary-spark"
    assert from_env({}).drainer_close_timeout == 120.0
    opts = from_env(
        {
            "BINLOG_OPERATOR_SPARK_SERVICE_ACCOUNT": "spark-a",
            "BINLOG_OPERATOR_DRAINER_CLOSE_TIMEOUT": "30",
        }
    )
    assert (opts.spark_account, opts.drainer_close_timeout) == ("spark-a", 30.0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


class Drainers:
    """Closing drainers on a fake clock: a drainer in ``fail_first`` fails that many attempts
    (each costing ``cost`` seconds, as an HTTP timeout would), then closes at once."""

    def __init__(self, clock: FakeClock, fail_first: dict[str, int], cost: float = 10.0) -> None:
        self.clock, self.fail_first, self.cost = clock, fail_first, cost
        self.attempts: list[tuple[str, float, float]] = []  # (drainer, at, within)

    async def attempt(self, drainer: str, within: float) -> None:
        self.attempts.append((drainer, self.clock.now, within))
        if self.fail_first.get(drainer, 0) > 0:
            self.fail_first[drainer] -= 1
            self.clock.now += min(self.cost, within)
            raise ScaleDownError(f"drainer {drainer} unreachable (attempt {len(self.attempts)})")


async def test_closing_drainers_retries_and_then_gives_up_within_the_budget() -> None:
    """The worked example of binlog_operator.teardown."""
    clock = FakeClock()
    nodes = Drainers(clock, {"b": 99})
    left = await close_within(["a", "b"], nodes.attempt, budget=60, delay=15, clock=clock)
    assert left == {"b": "drainer b unreachable (attempt 4)"}
    assert nodes.attempts == [("a", 0, 60), ("b", 0, 60), ("b", 25, 35), ("b", 50, 10)]
    assert clock.now == 60  # never past the budget


async def test_a_drainer_that_closes_on_a_retry_is_not_left() -> None:
    clock = FakeClock()
    nodes = Drainers(clock, {"a": 1, "b": 2}, cost=1)
    left = await close_within(["a", "b"], nodes.attempt, budget=120, delay=15, clock=clock)
    assert left == {}
    assert [d for d, _, _ in nodes.attempts] == ["a", "b", "a", "b", "b"]
    assert await close_within([], nodes.attempt, budget=1, delay=1, clock=clock) == {}
