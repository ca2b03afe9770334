"""A BinlogCluster's spec, parsed and validated (pure; no I/O).

Invariant: ``parse`` either returns a ``ClusterSpec`` every manifest builder can use as is, or
raises one ``SpecError`` listing every problem found, so a bad spec is reported once, clearly,
and never half-applied. Defaults live here and only here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from binlog_operator.autoscale import AutoscaleSpec, parse_autoscale
from binlog_operator.feedspec import FeedSpec, parse_feeds
from binlog_operator.kafkasink import KafkaSpec, parse_kafka
from tributary.errors import TributaryError
from tributary.sinks.urls import redact

DEFAULT_IMAGE = "tributary:0.1.0"
DEFAULT_SPARK_ACCOUNT = "tributary-spark"  # the chart's spark.serviceAccount.name
DEFAULT_STAGING_MOUNT = "/staging"
_RESERVED_MOUNTS = ("/etc/binlog", "/var/lib/binlog")  # configs.CONFIG_DIR, DATA_DIR
_JVM_SIZE = re.compile(r"^[0-9]+[kmgtKMGT]?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_URL = re.compile(r"^https?://[^\s/]+$")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
_KAFKA_PASSWORD = re.compile(r"^kafka://[^/@]*:[^/@]*@", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@?#]*:[^/@?#]*@")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")


class SpecError(TributaryError, ValueError):
    """The spec cannot be reconciled; retrying will not help until it is edited."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Storage:
    size: str = "10Gi"
    storage_class: str | None = None


@dataclass(frozen=True)
class PumpSpec:
    # with ``autoscale``: ``spec.pumps.replicas`` clamped to its bounds (the operator's pilot
    # writes that field; a manual value is applied within the bounds until its next step)
    replicas: int = 3
    storage: Storage = field(default_factory=Storage)
    resources: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    autoscale: AutoscaleSpec | None = None


@dataclass(frozen=True)
class CatchUpSpec:
    """A drainer's Spark catch-up (``[syncer.catchup]``). Without ``kubernetes`` the job runs
    ``local[*]`` in the drainer's pod; with it, its executors are pods (client mode) running as
    ``service_account`` and mounting ``staging_claim`` (an existing ReadWriteMany claim) at
    ``staging_mount``, where the drainer's pod mounts it too."""

    kubernetes: bool = False
    staging_claim: str = ""
    staging_mount: str = DEFAULT_STAGING_MOUNT
    service_account: str = DEFAULT_SPARK_ACCOUNT
    executors: int = 2
    executor_cores: int = 1
    executor_memory: str = "1g"


@dataclass(frozen=True)
class DrainerSpec:
    name: str
    sink_uri: str
    storage: Storage = field(default_factory=Storage)
    resources: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    catchup: CatchUpSpec | None = None  # None: no catch-up (unless config enables it)
    kafka: KafkaSpec | None = None  # the sink, instead of sink_uri ("" then)
    # the sink URL in a Secret (it holds a password), instead of sink_uri ("" then): the pod
    # reads it as DRAINER_SYNCER_SINK_URI, the ConfigMap never holds it
    sink_secret: SecretKey | None = None
    # a ConfigMap key holding a drainer state exported by ``binlogctl export-drainer-state``:
    # the drainer's first start continues after its checkpoint (``initial-state``)
    initial_state: SecretKey | None = None


@dataclass(frozen=True)
class SecretKey:
    """One key of a Secret (or ConfigMap) in the cluster's namespace."""

    name: str
    key: str


@dataclass(frozen=True)
class CaptureSpec:
    replicas: int = 0
    resources: Mapping[str, Any] = field(default_factory=dict)
    # the upstream MySQL/MariaDB URL (it holds a password), passed as CDC_UPSTREAM
    upstream: SecretKey | None = None
    # the changefeeds the operator keeps on the capture cluster (``feedspec``)
    changefeeds: tuple[FeedSpec, ...] = ()


@dataclass(frozen=True)
class ClusterSpec:
    etcd_endpoints: tuple[str, ...]
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    tls_secret: str | None = None
    pumps: PumpSpec = field(default_factory=PumpSpec)
    drainers: tuple[DrainerSpec, ...] = ()
    captures: CaptureSpec = field(default_factory=CaptureSpec)


def parse(
    spec: Mapping[str, Any],
    default_image: str = DEFAULT_IMAGE,
    spark_account: str = DEFAULT_SPARK_ACCOUNT,
) -> ClusterSpec:
    """The validated spec; raises SpecError naming every problem. ``spark_account`` is the
    default ``catchup.serviceAccount`` (the chart's Spark service account)."""
    problems: list[str] = []
    etcd = _map(spec.get("etcd"), "etcd", problems)
    endpoints = tuple(str(e) for e in etcd.get("endpoints") or ())
    if not endpoints:
        problems.append("etcd.endpoints: at least one endpoint is required")
    problems += [
        f"etcd.endpoints: {e!r} is not an http(s)://host:port URL"
        for e in endpoints
        if not _URL.match(e)
    ]
    pumps_raw = _map(spec.get("pumps"), "pumps", problems)
    autoscale = parse_autoscale(pumps_raw.get("autoscale"), "pumps.autoscale", problems)
    replicas = _count(pumps_raw.get("replicas", 3), "pumps.replicas", problems)
    pumps = PumpSpec(
        replicas=autoscale.clamp(replicas) if autoscale else replicas,
        storage=_storage(pumps_raw.get("storage"), "pumps.storage", problems),
        resources=_map(pumps_raw.get("resources"), "pumps.resources", problems),
        config=_map(pumps_raw.get("config"), "pumps.config", problems),
        autoscale=autoscale,
    )
    drainers = tuple(
        _drainer(d, f"drainers[{i}]", problems, spark_account)
        for i, d in enumerate(spec.get("drainers") or ())
    )
    names = [d.name for d in drainers]
    problems += [
        f"drainers: name {n!r} is used twice" for n in sorted(set(names)) if names.count(n) > 1
    ]
    captures_raw = _map(spec.get("captures"), "captures", problems)
    captures = CaptureSpec(
        replicas=_count(captures_raw.get("replicas", 0), "captures.replicas", problems),
        resources=_map(captures_raw.get("resources"), "captures.resources", problems),
        upstream=_upstream(captures_raw.get("upstreamSecret"), problems),
        changefeeds=parse_feeds(captures_raw.get("changefeeds"), problems),
    )
    if captures.replicas and captures.upstream is None:
        problems.append(
            "captures.upstreamSecret: required when captures.replicas > 0 (a Secret whose key "
            "holds the upstream URL mysql://user:password@host:port/)"
        )
    tls = _map(spec.get("tls"), "tls", problems)
    policy = str(spec.get("imagePullPolicy", "IfNotPresent"))
    if policy not in ("Always", "IfNotPresent", "Never"):
        problems.append(f"imagePullPolicy: {policy!r} is not Always, IfNotPresent or Never")
    if problems:
        raise SpecError(problems)
    return ClusterSpec(
        etcd_endpoints=endpoints,
        image=str(spec.get("image") or default_image),
        image_pull_policy=policy,
        tls_secret=str(tls["secretName"]) if tls.get("secretName") else None,
        pumps=pumps,
        drainers=drainers,
        captures=captures,
    )


def parse_cluster(
    spec: Mapping[str, Any], default_image: str = DEFAULT_IMAGE
) -> tuple[ClusterSpec, tuple[dict[str, Any], ...]]:
    """The cluster's own spec (``drainers`` empty) and its ``drainers[]`` entries as given: each
    entry becomes a Drainer resource, which validates the rest of it and reports there. Raises
    SpecError for the cluster's problems, among them an entry that has no usable name (its
    Drainer could not be named) or a name used twice."""
    problems: list[str] = []
    raw = spec.get("drainers") or []
    entries: list[dict[str, Any]] = []
    if not isinstance(raw, list):
        problems.append("drainers: must be a list")
        raw = []
    for i, d in enumerate(raw):
        entry = _map(d, f"drainers[{i}]", problems)
        if isinstance(entry.get("sinkURI"), str) and _URL_PASSWORD.match(entry["sinkURI"]):
            # the Drainer made of it is refused; it must not carry the password either
            entry = {**entry, "sinkURI": redact(entry["sinkURI"])}
        name = str(entry.get("name", ""))
        if not _DNS_LABEL.match(name) or len(name) > 30:
            problems.append(
                f"drainers[{i}].name: {name!r} must be a DNS label of at most 30 characters"
            )
        entries.append(entry)
    names = [str(e.get("name", "")) for e in entries]
    problems += [
        f"drainers: name {n!r} is used twice" for n in sorted(set(names)) if names.count(n) > 1
    ]
    try:
        cluster = parse({k: v for k, v in spec.items() if k != "drainers"}, default_image)
    except SpecError as e:
        problems = e.problems + problems
    if problems:
        raise SpecError(problems)
    return cluster, tuple(entries)


def parse_drainer(
    raw: Mapping[str, Any], name: str, spark_account: str = DEFAULT_SPARK_ACCOUNT
) -> DrainerSpec:
    """One drainer (a Drainer resource's ``spec``, as ``spec.<field>``); SpecError naming every
    problem."""
    problems: list[str] = []
    drainer = _drainer({**raw, "name": name}, "spec", problems, spark_account)
    if problems:
        raise SpecError(problems)
    return drainer


def _drainer(raw: object, where: str, problems: list[str], spark_account: str) -> DrainerSpec:
    d = _map(raw, where, problems)
    name = str(d.get("name", ""))
    if not _DNS_LABEL.match(name) or len(name) > 30:
        problems.append(f"{where}.name: {name!r} must be a DNS label of at most 30 characters")
    sink = str(d.get("sinkURI") or "")
    kafka = parse_kafka(d.get("kafka"), f"{where}.kafka", problems)
    secret = _secret_key(d.get("sinkURISecret"), f"{where}.sinkURISecret", "sink-uri", problems)
    given = [k for k in ("sinkURI", "sinkURISecret", "kafka") if d.get(k) not in (None, "")]
    if len(given) > 1:
        problems.append(f"{where}: {' and '.join(given)} name the sink twice; give one of them")
    elif given in (["kafka"], ["sinkURISecret"]):
        pass
    elif not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", sink):
        shown = f"...@{sink.rpartition('@')[2]}" if "@" in sink else sink  # events: no password
        problems.append(f"{where}.sinkURI: {shown!r} must be a URL such as mysql://user@host:3306/")
    elif _KAFKA_PASSWORD.match(sink):
        problems.append(
            f"{where}.sinkURI: a kafka:// URL with a password would be stored in the ConfigMap; "
            "use kafka.sasl.secretName (a Secret) instead"
        )
    elif _URL_PASSWORD.match(sink):
        problems.append(
            f"{where}.sinkURI: a URL with a password would be stored in the ConfigMap; put the "
            "whole URL in a Secret and name it in sinkURISecret ({name, key}) instead"
        )
    return DrainerSpec(
        name=name,
        sink_uri=sink,
        storage=_storage(d.get("storage"), f"{where}.storage", problems),
        resources=_map(d.get("resources"), f"{where}.resources", problems),
        config=_map(d.get("config"), f"{where}.config", problems),
        catchup=_catchup(d.get("catchup"), f"{where}.catchup", problems, spark_account),
        kafka=kafka,
        sink_secret=secret,
        initial_state=_secret_key(
            d.get("initialState"), f"{where}.initialState", "drainer-state.json", problems
        ),
    )


_K8S_ONLY = (
    "stagingClaim",
    "stagingMount",
    "serviceAccount",
    "executors",
    "executorCores",
    "executorMemory",
)


def _catchup(
    raw: object, where: str, problems: list[str], spark_account: str
) -> CatchUpSpec | None:
    if raw is None:
        return None
    c = _map(raw, where, problems)
    k8s = c.get("kubernetes", False)
    if not isinstance(k8s, bool):
        problems.append(f"{where}.kubernetes: {k8s!r} must be true or false")
        return None
    if not k8s:
        problems += [
            f"{where}.{key}: only used with kubernetes: true (the job's executors as pods)"
            for key in _K8S_ONLY
            if key in c
        ]
        return CatchUpSpec()
    claim = str(c.get("stagingClaim") or "")
    if not claim:
        problems.append(
            f"{where}.stagingClaim: required with kubernetes: true (an existing ReadWriteMany "
            "PersistentVolumeClaim the drainer and the executor pods both mount)"
        )
    elif not _DNS_NAME.match(claim):
        problems.append(f"{where}.stagingClaim: {claim!r} is not a PersistentVolumeClaim name")
    mount = str(c.get("stagingMount", DEFAULT_STAGING_MOUNT))
    if not mount.startswith("/") or mount.rstrip("/") == "" or ".." in mount.split("/"):
        problems.append(f"{where}.stagingMount: {mount!r} must be an absolute path below /")
    elif any(_overlaps(mount, used) for used in _RESERVED_MOUNTS):
        problems.append(
            f"{where}.stagingMount: {mount!r} overlaps the drainer's own mounts "
            f"({', '.join(_RESERVED_MOUNTS)})"
        )
    account = str(c.get("serviceAccount") or spark_account)
    if not _DNS_NAME.match(account):
        problems.append(f"{where}.serviceAccount: {account!r} is not a ServiceAccount name")
    memory = str(c.get("executorMemory", "1g"))
    if not _JVM_SIZE.match(memory):
        problems.append(f"{where}.executorMemory: {memory!r} must be a JVM size such as 2g")
    return CatchUpSpec(
        kubernetes=True,
        staging_claim=claim,
        staging_mount=mount.rstrip("/"),
        service_account=account,
        executors=_positive(c.get("executors", 2), f"{where}.executors", problems),
        executor_cores=_positive(c.get("executorCores", 1), f"{where}.executorCores", problems),
        executor_memory=memory,
    )


def _overlaps(path: str, other: str) -> bool:
    """Whether one of two absolute paths is the other or below it."""
    a, b = path.rstrip("/") + "/", other.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _upstream(raw: object, problems: list[str]) -> SecretKey | None:
    return _secret_key(raw, "captures.upstreamSecret", "upstream", problems)


def _secret_key(raw: object, where: str, default_key: str, problems: list[str]) -> SecretKey | None:
    """A ``{name, key}`` naming one key of a Secret or ConfigMap; None if not given."""
    if raw is None:
        return None
    s = _map(raw, where, problems)
    name, key = str(s.get("name", "")), str(s.get("key", default_key))
    if not _DNS_NAME.match(name):
        problems.append(f"{where}.name: {name!r} is not a Secret name")
    if not _SECRET_KEY.match(key):
        problems.append(f"{where}.key: {key!r} is not a Secret key")
    return SecretKey(name, key)


def _storage(raw: object, where: str, problems: list[str]) -> Storage:
    s = _map(raw, where, problems)
    size = str(s.get("size", "10Gi"))
    if not _QUANTITY.match(size):
        problems.append(f"{where}.size: {size!r} is not a quantity such as 10Gi")
    cls = s.get("storageClassName")
    return Storage(size=size, storage_class=str(cls) if cls else None)


def _count(raw: object, where: str, problems: list[str]) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        problems.append(f"{where}: {raw!r} must be a non-negative integer")
        return 0
    return raw


def _positive(raw: object, where: str, problems: list[str]) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        problems.append(f"{where}: {raw!r} must be an integer of at least 1")
        return 1
    return raw


def _map(raw: object, where: str, problems: list[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, not {type(raw).__name__}")
        return {}
    return dict(raw)
