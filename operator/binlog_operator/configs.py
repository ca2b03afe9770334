"""pump.toml and drainer.toml as the operator renders them into ConfigMaps.

Invariant: the keys that tie a process to its pod (listen addresses, data directory, etcd
endpoints, TLS file paths) are the operator's; a user's ``config`` may set any other key, and
setting a managed one is a SpecError rather than a silent override. The rendered text loads with
the service's own settings loader (``check_all``), so a ConfigMap never holds a config its service
would refuse. The TLS files exist only in the pods (the Secret mounted at ``TLS_DIR``), so the
check renders them under a temporary directory holding empty files of the same names: what is
checked is everything else, and that the paths are set.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from binlog_operator import kafkasink
from binlog_operator.spec import ClusterSpec, DrainerSpec, SpecError
from tributary.config.drainer import DrainerConfig
from tributary.config.pump import PumpConfig
from tributary.settings import SettingsError, load
from tributary.settings.dump import toml_literal

PUMP_GRPC_PORT = 8250
PUMP_HTTP_PORT = PUMP_GRPC_PORT  # one port for gRPC and the HTTP API, as tidb-binlog's
DRAINER_GRPC_PORT = 8249
DRAINER_HTTP_PORT = DRAINER_GRPC_PORT
CAPTURE_PORT = 8300
CONFIG_DIR = "/etc/binlog"
DATA_DIR = "/var/lib/binlog"
TLS_DIR = "/etc/binlog/tls"
STATE_DIR = "/etc/binlog/initial-state"
"""Where a drainer's ``initialState`` ConfigMap is mounted (its ``initial-state`` file)."""
CAPTURE_CLUSTER_ID = "default"
"""The cdc cluster id of every BinlogCluster's captures (``binlog-cdc server --cluster-id``): the
etcd key prefix ``/tidb/cdc/<id>/`` the status reads changefeeds from. One BinlogCluster per
etcd, as for its pumps and drainers, so TiCDC's default id serves."""

SINK_URI_ENV = "DRAINER_SYNCER_SINK_URI"
"""The drainer's ``[syncer] sink-uri`` from its environment: set from ``sinkURISecret``."""

T = TypeVar("T")

_MANAGED = ("addr", "advertise-addr", "status-addr", "data-dir", "node-id", "pd-urls")
_WHY = {  # why a managed key cannot be set: the refusal says it
    "data-dir": f" (the data is on the pod's volume at {DATA_DIR}: it cannot move in place)",
    "pd-urls": " (spec.etcd.endpoints)",
}
_CATCHUP_MANAGED = ("enabled",)
_K8S_CATCHUP_MANAGED = ("enabled", "staging-dir", "kubernetes")


def drainer_name(cluster: str, drainer: str) -> str:
    """The name of a drainer's StatefulSet, Service and ConfigMap."""
    return f"{cluster}-drainer-{drainer}"


def staging_dir(mount: str, drainer_sts: str) -> str:
    """A drainer's catch-up staging directory on the shared claim: its own directory there, so
    drainers of several clusters can share one claim (the job writes the executors' pod template
    and its log beside it, so inside that directory too)."""
    return f"{mount}/{drainer_sts}/catchup"


def pump_toml(spec: ClusterSpec, tls_dir: str = TLS_DIR) -> str:
    managed: dict[str, Any] = {
        "addr": f"0.0.0.0:{PUMP_GRPC_PORT}",
        "data-dir": f"{DATA_DIR}/pump",
        "pd-urls": ",".join(spec.etcd_endpoints),
    }
    doc = _merge(spec.pumps.config, managed, "pumps.config", spec, tls_dir)
    return _render_checked(doc, "pumps.config")


def drainer_toml(
    spec: ClusterSpec,
    drainer: DrainerSpec,
    cluster: str,
    namespace: str,
    tls_dir: str = TLS_DIR,
) -> str:
    """``cluster`` and ``namespace`` are the BinlogCluster's: the Kubernetes catch-up stages
    under the drainer's name and runs its executors in that namespace. A ``kafka`` sink is
    ``db-type = "kafka"`` with its ``[syncer.to]`` keys (no secret among them)."""
    managed: dict[str, Any] = {
        "addr": f"0.0.0.0:{DRAINER_GRPC_PORT}",
        "data-dir": f"{DATA_DIR}/drainer",
        "pd-urls": ",".join(spec.etcd_endpoints),
    }
    where = f"drainers[{drainer.name}]"
    if drainer.initial_state is not None:
        if "initial-state" in drainer.config:
            raise SpecError([f"{where}.config.initial-state: set by {where}.initialState"])
        managed["initial-state"] = f"{STATE_DIR}/{drainer.initial_state.key}"
    doc = _merge(drainer.config, managed, f"{where}.config", spec, tls_dir)
    syncer = dict(doc.get("syncer") or {})
    if drainer.kafka is not None:
        syncer = _kafka(drainer, syncer)
    elif drainer.sink_secret is not None:  # the pod reads it from the Secret (SINK_URI_ENV)
        if "sink-uri" in syncer:
            where = f"drainers[{drainer.name}]"
            raise SpecError([f"{where}.config.syncer.sink-uri: set by {where}.sinkURISecret"])
    else:
        syncer["sink-uri"] = drainer.sink_uri
    if drainer.catchup is not None:
        sts = drainer_name(cluster, drainer.name)
        syncer["catchup"] = _catchup(spec, drainer, sts, namespace, syncer.get("catchup"))
    doc["syncer"] = syncer
    return _render_checked(doc, f"drainers[{drainer.name}].config")


def _kafka(drainer: DrainerSpec, syncer: dict[str, Any]) -> dict[str, Any]:
    """``[syncer]`` with ``db-type = "kafka"`` and the ``kafka`` block's ``[syncer.to]`` keys;
    the user's other ``[syncer.to]`` keys stay, setting one the block owns is a SpecError."""
    assert drainer.kafka is not None
    user = syncer.get("to")
    to = dict(user) if isinstance(user, Mapping) else {}
    where = f"drainers[{drainer.name}]"
    clash = [f"syncer.{k}" for k in kafkasink.MANAGED_SYNCER if k in syncer]
    clash += [f"syncer.to.{k}" for k in kafkasink.MANAGED_TO if k in to]
    if clash:
        raise SpecError([f"{where}.config.{k}: set by {where}.kafka, remove it" for k in clash])
    to.update(kafkasink.syncer_to(drainer.kafka))
    return {**syncer, "db-type": "kafka", "to": to}


def _catchup(
    spec: ClusterSpec, drainer: DrainerSpec, sts: str, namespace: str, user: object
) -> dict[str, Any]:
    """``[syncer.catchup]``: the user's keys (lag-threshold, ...) and the ones ``catchup``
    manages; setting a managed one in ``config`` is a SpecError."""
    c = drainer.catchup
    assert c is not None
    doc = dict(user) if isinstance(user, Mapping) else {}
    owned = _K8S_CATCHUP_MANAGED if c.kubernetes else _CATCHUP_MANAGED
    clash = sorted(k for k in doc if k in owned)
    if clash:
        where = f"drainers[{drainer.name}]"
        raise SpecError(
            [f"{where}.config.syncer.catchup.{k}: set by {where}.catchup, remove it" for k in clash]
        )
    doc["enabled"] = True
    if c.kubernetes:
        doc["staging-dir"] = staging_dir(c.staging_mount, sts)
        doc["kubernetes"] = {
            "enabled": True,
            "namespace": namespace,
            "image": spec.image,
            "service-account": c.service_account,
            "staging-claim": c.staging_claim,
            "staging-mount": c.staging_mount,
            "executors": c.executors,
            "executor-cores": c.executor_cores,
            "executor-memory": c.executor_memory,
        }
    return doc


def _merge(
    user: Mapping[str, Any], managed: dict[str, Any], where: str, spec: ClusterSpec, tls_dir: str
) -> dict[str, Any]:
    clash = sorted(k for k in user if k in _MANAGED)
    if clash:
        raise SpecError(
            [f"{where}.{k}: managed by the operator{_WHY.get(k, '')}, remove it" for k in clash]
        )
    doc = {**user, **managed}
    if spec.tls_secret:
        security = dict(doc.get("security") or {})
        security.update(
            {
                "ssl-ca": f"{tls_dir}/ca.crt",
                "ssl-cert": f"{tls_dir}/tls.crt",
                "ssl-key": f"{tls_dir}/tls.key",
            }
        )
        doc["security"] = security
    return doc


def _render_checked(doc: Mapping[str, Any], where: str) -> str:
    try:
        return render(doc)
    except TypeError as e:  # e.g. a null value: TOML has none
        raise SpecError([f"{where}: {e}"]) from e


def render(doc: Mapping[str, Any]) -> str:
    """TOML text: plain keys first, then one ``[table]`` per nested mapping (recursively)."""
    lines: list[str] = []
    _render(doc, (), lines)
    return "\n".join(lines).strip() + "\n"


def _render(doc: Mapping[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    tables = {k: v for k, v in doc.items() if isinstance(v, Mapping)}
    if path:
        lines += ["", "[" + ".".join(path) + "]"]
    lines += [f"{k} = {toml_literal(v)}" for k, v in doc.items() if k not in tables]
    for k, v in tables.items():
        _render(v, (*path, k), lines)


def check_all(spec: ClusterSpec, cluster: str, namespace: str) -> None:
    """Render and load every config of ``spec``; one SpecError with every problem."""
    checks: list[Callable[[str], object]] = [lambda tls: check_pump(pump_toml(spec, tls))]
    for d in spec.drainers:
        checks.append(partial(_check_drainer, spec, d, cluster, namespace))
    _check_with_tls(checks)


def _check_drainer(
    spec: ClusterSpec, d: DrainerSpec, cluster: str, namespace: str, tls: str
) -> None:
    # a Kafka sink's TLS paths are not opened by the settings loader: rendered as in the pod
    text = drainer_toml(spec, d, cluster, namespace, tls)
    env = kafkasink.stand_in_env(d.kafka)
    if d.sink_secret is not None:  # the URL itself is only in the pod: any sink stands in
        env[SINK_URI_ENV] = "blackhole://"
    check_drainer(text, d.name, env)


def check_one_drainer(spec: ClusterSpec, d: DrainerSpec, cluster: str, namespace: str) -> None:
    """Render and load one drainer's config (the cluster's own already checked)."""
    _check_with_tls([partial(_check_drainer, spec, d, cluster, namespace)])


def _check_with_tls(checks: list[Callable[[str], object]]) -> None:
    """Run each check with a directory of stand-in TLS files; one SpecError with every problem."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="binlog-operator-check-") as tls:
        for file in ("ca.crt", "tls.crt", "tls.key"):
            open(os.path.join(tls, file), "w").close()
        for check in checks:
            try:
                check(tls)
            except SpecError as e:
                problems += e.problems
    if problems:
        raise SpecError(problems)


def check_pump(text: str) -> PumpConfig:
    flags = ["--node-id", "p-0", "--advertise-addr", f"p-0.p.ns.svc:{PUMP_GRPC_PORT}"]
    return _check(text, flags, PumpConfig, "PUMP", "pumps.config")


def check_drainer(text: str, name: str, env: Mapping[str, str] | None = None) -> DrainerConfig:
    """Load a drainer.toml as the pod does: its per-pod flags and ``env`` (the pod's variables
    that override the file, e.g. a Kafka sink's SASL credentials)."""
    flags = ["--node-id", "d-0", "--advertise-addr", f"d-0.d.ns.svc:{DRAINER_GRPC_PORT}"]
    # what the pod's POD_NAME / POD_IP give the Kubernetes catch-up (ignored without it)
    k8s = "--syncer-catchup-kubernetes-"
    flags += [f"{k8s}pod-name", "d-0", f"{k8s}pod-ip", "10.0.0.1"]
    return _check(text, flags, DrainerConfig, "DRAINER", f"drainers[{name}].config", env)


def _check(
    text: str,
    flags: list[str],
    cls: type[T],
    prefix: str,
    where: str,
    env: Mapping[str, str] | None = None,
) -> T:
    """Load ``text`` (with the per-pod ``flags`` the StatefulSet passes) with the service's
    settings loader; SpecError lists what it refused."""
    fd, path = tempfile.mkstemp(suffix=".toml")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return load(cls, ["--config", path, *flags], dict(env or {}), prefix)
    except SettingsError as e:
        raise SpecError([f"{where}: {p}" for p in e.problems]) from e
    finally:
        os.unlink(path)
