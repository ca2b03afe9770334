"""The Kubernetes objects of one BinlogCluster, as plain dicts (pure; no I/O).

``build`` turns a validated spec into every object the operator applies: per component a
ConfigMap with its TOML (pumps, drainers), a headless Service and a StatefulSet; all labelled and
owned by the BinlogCluster. Invariants: a pump's node id is its pod name (``--node-id
$(POD_NAME)``), so the registry record, the pod and the StatefulSet ordinal name the same thing;
the pump StatefulSet's replicas is the caller's ``pump_replicas`` (the spec's value only once a
scale-down has closed the pumps it removes), and a scale-down deletes the removed pumps' volume
claims (``PUMP_CLAIM_RETENTION``). A drainer with a Kubernetes catch-up runs as its Spark
service account, mounts the staging claim at the path its config names, and knows its pod's
name, namespace and IP from the downward API: what the job's driver, in that pod, needs to create
executor pods that mount the same claim at the same path. A drainer's StatefulSet records its
sink type (``immutable.SINK_TYPE``). The object shapes are in ``objects``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from binlog_operator import GROUP, KIND, MANAGER, VERSION, feedkafka, feedspec, kafkasink
from binlog_operator.configs import (
    CAPTURE_CLUSTER_ID,
    CAPTURE_PORT,
    CONFIG_DIR,
    DRAINER_GRPC_PORT,
    PUMP_GRPC_PORT,
    SINK_URI_ENV,
    STATE_DIR,
    TLS_DIR,
    drainer_name,
    drainer_toml,
    pump_toml,
)
from binlog_operator.immutable import SINK_TYPE, sink_type
from binlog_operator.objects import Obj, Pod, config_map, service, stateful_set
from binlog_operator.spec import ClusterSpec, DrainerSpec
from tributary.image import IMAGE_UID

PUMP_CLAIM_RETENTION = {"whenDeleted": "Retain", "whenScaled": "Delete"}
"""A pump removed by a scale-down is offline (its binlogs consumed) and its volume holds the
offline marker that keeps it from rejoining: the claim goes with it, so a later scale-up starts
that ordinal with a fresh volume. Deleting the whole StatefulSet keeps the claims."""


def pump_name(cluster: str) -> str:
    return f"{cluster}-pump"


def capture_name(cluster: str) -> str:
    return f"{cluster}-capture"


def pump_pod(cluster: str, ordinal: int) -> str:
    """The pod (and pump node id) of a pump ordinal."""
    return f"{pump_name(cluster)}-{ordinal}"


def labels(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "tributary",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGER,
    }


def pump_selector(cluster: str) -> str:
    """The label selector of a cluster's pump pods (the scale subresource reports it)."""
    sel = labels(cluster, "pump")
    return ",".join(
        f"{k}={sel[k]}" for k in ("app.kubernetes.io/instance", "app.kubernetes.io/component")
    )


def build(
    cluster: str, namespace: str, uid: str, spec: ClusterSpec, pump_replicas: int
) -> list[Obj]:
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "name": cluster,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    objs = _pumps(cluster, spec, pump_replicas)
    for d in spec.drainers:
        objs += _drainer(cluster, namespace, spec, d)
    objs += _captures(cluster, spec)
    for o in objs:
        o["metadata"]["namespace"] = namespace
        o["metadata"]["ownerReferences"] = [dict(owner)]
    return objs


def drainer_objects(
    cluster: str, namespace: str, spec: ClusterSpec, d: DrainerSpec, owner: Obj
) -> list[Obj]:
    """One drainer's ConfigMap, Service and StatefulSet, owned by ``owner`` (its Drainer)."""
    objs = _drainer(cluster, namespace, spec, d)
    for o in objs:
        o["metadata"]["namespace"] = namespace
        o["metadata"]["ownerReferences"] = [dict(owner)]
    return objs


def _pumps(cluster: str, spec: ClusterSpec, replicas: int) -> list[Obj]:
    name, lbl = pump_name(cluster), labels(cluster, "pump")
    cfg = pump_toml(spec)
    ports = {"grpc": PUMP_GRPC_PORT}  # gRPC and the HTTP API (probes, metrics) share it
    command = ["binlog-pump", "--config", f"{CONFIG_DIR}/pump.toml"]
    command += _identity(name, PUMP_GRPC_PORT)
    pod = Pod(
        spec.image,
        spec.image_pull_policy,
        spec.tls_secret,
        command,
        cfg,
        ports,
        spec.pumps.resources,
        https=True,
        http="grpc",
    )
    return [
        config_map(name, lbl, "pump.toml", cfg),
        service(name, lbl, ports),
        stateful_set(name, lbl, replicas, pod, spec.pumps.storage, PUMP_CLAIM_RETENTION),
    ]


def _drainer(cluster: str, namespace: str, spec: ClusterSpec, d: DrainerSpec) -> list[Obj]:
    name = drainer_name(cluster, d.name)
    lbl = {**labels(cluster, "drainer"), "binlog.io/drainer": d.name}
    cfg = drainer_toml(spec, d, cluster, namespace)
    ports = {"grpc": DRAINER_GRPC_PORT}  # gRPC and the HTTP API (probes, metrics) share it
    command = ["binlog-drainer", "--config", f"{CONFIG_DIR}/drainer.toml"]
    command += _identity(name, DRAINER_GRPC_PORT)
    pod = Pod(
        spec.image,
        spec.image_pull_policy,
        spec.tls_secret,
        command,
        cfg,
        ports,
        d.resources,
        https=True,
        http="grpc",
    )
    if d.sink_secret is not None:  # a URL with a password: never in the ConfigMap
        ref = {"name": d.sink_secret.name, "key": d.sink_secret.key}
        pod = replace(
            pod, env=(*pod.env, {"name": SINK_URI_ENV, "valueFrom": {"secretKeyRef": ref}})
        )
    pod = _with_initial_state(_with_catchup(_with_kafka(pod, d), d), d)
    sts = stateful_set(name, lbl, 1, pod, d.storage)
    kind = sink_type(d)
    if kind is not None:  # what a later edit may not change once there is a checkpoint
        sts["metadata"]["annotations"] = {SINK_TYPE: kind}
    return [config_map(name, lbl, "drainer.toml", cfg), service(name, lbl, ports), sts]


def _captures(cluster: str, spec: ClusterSpec) -> list[Obj]:
    name, lbl = capture_name(cluster), labels(cluster, "capture")
    pd = ",".join(spec.etcd_endpoints)
    command = ["binlog-cdc", "server", "--pd", pd, "--addr", f"0.0.0.0:{CAPTURE_PORT}"]
    command += ["--cluster-id", CAPTURE_CLUSTER_ID]
    command += ["--advertise-addr", f"$(POD_NAME).{name}.$(NAMESPACE).svc:{CAPTURE_PORT}"]
    if spec.tls_secret:  # the HTTP API over mutual TLS, as the pumps' and drainers'
        for key, file in (("ssl-ca", "ca.crt"), ("ssl-cert", "tls.crt"), ("ssl-key", "tls.key")):
            command += [f"--security-{key}", f"{TLS_DIR}/{file}"]
    ports = {"http": CAPTURE_PORT}
    upstream = spec.captures.upstream
    env: tuple[Obj, ...] = ()
    if upstream is not None:  # parse() requires it whenever captures run
        ref = {"name": upstream.name, "key": upstream.key}
        env = ({"name": "CDC_UPSTREAM", "valueFrom": {"secretKeyRef": ref}},)
    pod = Pod(
        spec.image,
        spec.image_pull_policy,
        spec.tls_secret,
        command,
        "",
        ports,
        spec.captures.resources,
        env,
        https=True,
    )
    pod = _with_storage(_with_claim_checks(_with_feed_tls(pod, spec), spec), spec)
    return [service(name, lbl, ports), stateful_set(name, lbl, spec.captures.replicas, pod)]


def _with_feed_tls(pod: Pod, spec: ClusterSpec) -> Pod:
    """Each TLS Secret a declared changefeed's Kafka sink names, mounted read-only at
    ``feedspec.tls_dir(secret)`` (the sink URL points there)."""
    volumes: list[Obj] = []
    mounts: list[Obj] = []
    for i, (secret, keys) in enumerate(feedspec.tls_secrets(spec.captures.changefeeds).items()):
        items = [{"key": key, "path": key} for key in keys]
        volumes.append(
            {
                "name": f"feed-tls-{i}",
                "secret": {"secretName": secret, "items": items, "defaultMode": 0o440},
            }
        )
        mounts.append(
            {"name": f"feed-tls-{i}", "mountPath": feedspec.tls_dir(secret), "readOnly": True}
        )
    return replace(pod, volumes=(*pod.volumes, *volumes), mounts=(*pod.mounts, *mounts))


def _with_writable_claims(
    pod: Pod, claims: Sequence[str], prefix: str, directory: Callable[[str], str]
) -> Pod:
    """Each of ``claims`` mounted read-write at ``directory(claim)`` as volume
    ``<prefix>-<i>``, with the image's user as the volumes' group so the capture can write."""
    if not claims:
        return pod
    names = [f"{prefix}-{i}" for i in range(len(claims))]
    volumes = tuple(
        {"name": name, "persistentVolumeClaim": {"claimName": claim}}
        for name, claim in zip(names, claims, strict=True)
    )
    mounts = tuple(
        {"name": name, "mountPath": directory(claim)}
        for name, claim in zip(names, claims, strict=True)
    )
    return replace(
        pod,
        volumes=(*pod.volumes, *volumes),
        mounts=(*pod.mounts, *mounts),
        fs_group=IMAGE_UID,
    )


def _with_claim_checks(pod: Pod, spec: ClusterSpec) -> Pod:
    """Each claim-check PersistentVolumeClaim a declared changefeed names, at
    ``feedkafka.claim_dir(claim)`` (its ``claim-check-storage-uri`` is there)."""
    claims = feedspec.claim_check_claims(spec.captures.changefeeds)
    return _with_writable_claims(pod, claims, "claim-check", feedkafka.claim_dir)


def _with_storage(pod: Pod, spec: ClusterSpec) -> Pod:
    """Each storage sink PersistentVolumeClaim a declared changefeed names, at
    ``feedspec.storage_dir(claim)`` (its sink URL's directory is there)."""
    claims = feedspec.storage_claims(spec.captures.changefeeds)
    return _with_writable_claims(pod, claims, "storage", feedspec.storage_dir)


def _with_kafka(pod: Pod, d: DrainerSpec) -> Pod:
    """A Kafka sink's credentials: the SASL user and password as env from their Secret, the
    TLS files as a Secret volume (never in the ConfigMap)."""
    volumes, mounts = kafkasink.pod_volumes(d.kafka)
    return replace(
        pod,
        env=(*pod.env, *kafkasink.pod_env(d.kafka)),
        volumes=(*pod.volumes, *volumes),
        mounts=(*pod.mounts, *mounts),
    )


def _with_catchup(pod: Pod, d: DrainerSpec) -> Pod:
    """What a Kubernetes catch-up adds to the drainer's pod: the Spark service account (the
    driver creates executor pods as it), ``POD_IP`` (the executors' way back to the driver), the
    staging claim at the staging mount, and the image's user as the volume's group."""
    c = d.catchup
    if c is None or not c.kubernetes:
        return pod
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    return replace(
        pod,
        env=(*pod.env, pod_ip),
        service_account=c.service_account,
        volumes=(
            *pod.volumes,
            {"name": "staging", "persistentVolumeClaim": {"claimName": c.staging_claim}},
        ),
        mounts=(*pod.mounts, {"name": "staging", "mountPath": c.staging_mount}),
        fs_group=IMAGE_UID,
    )


def _with_initial_state(pod: Pod, d: DrainerSpec) -> Pod:
    """An ``initialState`` ConfigMap mounted read-only at ``STATE_DIR`` (its key only)."""
    ref = d.initial_state
    if ref is None:
        return pod
    source = {"name": ref.name, "items": [{"key": ref.key, "path": ref.key}]}
    return replace(
        pod,
        volumes=(*pod.volumes, {"name": "initial-state", "configMap": source}),
        mounts=(
            *pod.mounts,
            {"name": "initial-state", "mountPath": STATE_DIR, "readOnly": True},
        ),
    )


def _identity(service: str, grpc_port: int) -> list[str]:
    """Node id = pod name; advertised at the pod's stable DNS name under its headless Service."""
    advertise = f"$(POD_NAME).{service}.$(NAMESPACE).svc:{grpc_port}"
    return ["--node-id", "$(POD_NAME)", "--advertise-addr", advertise]
