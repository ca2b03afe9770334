"""Generic Kubernetes object builders the manifests are made of (pure; no I/O).

Invariants: a StatefulSet's selector equals its pod template's labels; a pod template carries a
hash of its config file (a config edit rolls the pods), Prometheus scrape annotations for its
``http`` port, and probes on that port (``/ready``, ``/health``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from binlog_operator.configs import CONFIG_DIR, DATA_DIR, TLS_DIR
from binlog_operator.spec import Storage

Obj = dict[str, Any]


@dataclass(frozen=True)
class Pod:
    """What differs between the components' pod templates."""

    image: str
    pull_policy: str
    tls_secret: str | None
    command: list[str]
    config: str  # the TOML mounted at CONFIG_DIR ("" = none)
    ports: Mapping[str, int]  # must include ``http``, the port probes and metrics use
    resources: Mapping[str, Any]
    env: tuple[Obj, ...] = ()  # container env entries after POD_NAME and NAMESPACE
    https: bool = False  # the http port serves TLS with client certificates (tls_secret's)
    service_account: str = ""  # "" = the namespace's default
    volumes: tuple[Obj, ...] = ()  # more pod volumes, each mounted by an entry of ``mounts``
    mounts: tuple[Obj, ...] = ()
    fs_group: int | None = None  # the pod's securityContext.fsGroup (group of its volumes)
    http: str = "http"  # the name of the port serving HTTP (pumps, drainers: their gRPC port)


def config_map(name: str, lbl: Mapping[str, str], key: str, text: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": dict(lbl)},
        "data": {key: text},
    }


def service(name: str, lbl: Mapping[str, str], ports: Mapping[str, int]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": dict(lbl)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # peers resolve a pod before it is ready
            "selector": dict(lbl),
            "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports.items()],
        },
    }


def _probe(pod: Pod, path: str) -> Obj:
    """An ``httpGet`` on the http port; with client-certificate TLS, which the kubelet cannot
    present, an exec of ``servicekit.probe`` in the pod with the mounted certificates."""
    if not (pod.https and pod.tls_secret):
        return {"httpGet": {"path": path, "port": pod.http}}
    url = f"https://127.0.0.1:{pod.ports[pod.http]}{path}"
    probe = ["python", "-m", "tributary.servicekit.probe", url, "--tls-dir", TLS_DIR]
    return {"exec": {"command": probe}, "timeoutSeconds": 5}


def stateful_set(
    name: str,
    lbl: Mapping[str, str],
    replicas: int,
    pod: Pod,
    storage: Storage | None = None,
    claim_retention: Mapping[str, str] | None = None,
) -> Obj:
    mounts: list[Obj] = []
    volumes: list[Obj] = []
    if pod.config:
        mounts.append({"name": "config", "mountPath": CONFIG_DIR, "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": name}})
    if storage is not None:
        mounts.append({"name": "data", "mountPath": DATA_DIR})
    if pod.tls_secret:
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": pod.tls_secret}})
    mounts += pod.mounts
    volumes += pod.volumes
    http = pod.http
    scheme = "https" if pod.https and pod.tls_secret else "http"
    container: Obj = {
        "name": lbl["app.kubernetes.io/component"],
        "image": pod.image,
        "imagePullPolicy": pod.pull_policy,
        "command": pod.command[:1],
        "args": pod.command[1:],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            *pod.env,
        ],
        "ports": [{"name": n, "containerPort": p} for n, p in pod.ports.items()],
        "readinessProbe": {**_probe(pod, "/ready"), "periodSeconds": 5},
        "livenessProbe": {**_probe(pod, "/health"), "periodSeconds": 10, "failureThreshold": 6},
        "resources": dict(pod.resources),
        "volumeMounts": mounts,
    }
    digest = hashlib.sha256(pod.config.encode()).hexdigest()[:16]
    pod_spec: Obj = {
        "terminationGracePeriodSeconds": 60,
        "containers": [container],
        "volumes": volumes,
    }
    if pod.service_account:
        pod_spec["serviceAccountName"] = pod.service_account
    if pod.fs_group is not None:
        pod_spec["securityContext"] = {"fsGroup": pod.fs_group}
    sts: Obj = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": dict(lbl)},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": dict(lbl)},
            "template": {
                "metadata": {
                    "labels": dict(lbl),
                    "annotations": {
                        "binlog.io/config-hash": digest,
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(pod.ports[http]),
                        "prometheus.io/path": "/metrics",
                        "prometheus.io/scheme": scheme,
                    },
                },
                "spec": pod_spec,
            },
        },
    }
    if storage is not None:
        claim: Obj = {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": storage.size}},
            },
        }
        if storage.storage_class:
            claim["spec"]["storageClassName"] = storage.storage_class
        sts["spec"]["volumeClaimTemplates"] = [claim]
        if claim_retention:
            sts["spec"]["persistentVolumeClaimRetentionPolicy"] = dict(claim_retention)
    return sts
