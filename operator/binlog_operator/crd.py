"""The BinlogCluster CustomResourceDefinition (pure; ``python -m binlog_operator.crd`` prints it).

The chart's ``crds/binlogclusters.yaml`` is this output, checked in; a unit test fails when they
differ. Invariant: the scale subresource's spec path is the pump replica count and its status
path is the pump StatefulSet's replica count the operator last applied, so ``kubectl scale`` and
HPA-style tools see pumps.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from binlog_operator import GROUP, KIND, PLURAL, VERSION

Schema = dict[str, Any]


def _obj(props: Schema, required: list[str] | None = None, **extra: Any) -> Schema:
    s: Schema = {"type": "object", "properties": props, **extra}
    if required:
        s["required"] = required
    return s


_FREE: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STR: Schema = {"type": "string"}
_INT: Schema = {"type": "integer", "format": "int64"}
_STORAGE = _obj({"size": {**_STR, "default": "10Gi"}, "storageClassName": _STR})
_POSITIVE: Schema = {"type": "integer", "minimum": 1}
# no defaults here: the operator's (spec.py) apply, and a key given without kubernetes is refused
_CATCHUP = _obj(
    {
        "kubernetes": {
            "type": "boolean",
            "description": "executors as pods (Spark-on-Kubernetes, client mode); "
            "false: local[*] in the drainer's pod",
        },
        "stagingClaim": {
            **_STR,
            "description": "existing ReadWriteMany PersistentVolumeClaim for the staged ranges "
            "(required with kubernetes)",
        },
        "stagingMount": {**_STR, "description": "where drainer and executors mount it (/staging)"},
        "serviceAccount": {
            **_STR,
            "description": "account of the drainer pod and executors (the chart's Spark account)",
        },
        "executors": _POSITIVE,
        "executorCores": _POSITIVE,
        "executorMemory": {**_STR, "description": "JVM size per executor, e.g. 2g (1g)"},
    },
    description="Spark catch-up of a backlog ([syncer.catchup] enabled)",
)

SPEC = _obj(
    {
        "image": {**_STR, "description": "image all components run (default: the operator's)"},
        "imagePullPolicy": {**_STR, "enum": ["Always", "IfNotPresent", "Never"]},
        "etcd": _obj({"endpoints": {"type": "array", "minItems": 1, "items": _STR}}, ["endpoints"]),
        "tls": _obj(
            {"secretName": {**_STR, "description": "secret with ca.crt, tls.crt, tls.key"}}
        ),
        "pumps": _obj(
            {
                "replicas": {"type": "integer", "minimum": 0, "default": 3},
                "storage": _STORAGE,
                "resources": _FREE,
                "config": {**_FREE, "description": "extra pump.toml keys"},
            }
        ),
        "drainers": {
            "type": "array",
            "items": _obj(
                {
                    "name": {**_STR, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 30},
                    "sinkURI": {**_STR, "description": "mysql://, sqlite://, file://, kafka://..."},
                    "storage": _STORAGE,
                    "resources": _FREE,
                    "config": {**_FREE, "description": "extra drainer.toml keys"},
                    "catchup": _CATCHUP,
                },
                ["name", "sinkURI"],
            ),
        },
        "captures": _obj(
            {
                "replicas": {"type": "integer", "minimum": 0, "default": 0},
                "resources": _FREE,
                "upstreamSecret": _obj(
                    {
                        "name": _STR,
                        "key": {**_STR, "default": "upstream"},
                    },
                    ["name"],
                    description="the Secret key holding the upstream MySQL/MariaDB URL",
                ),
            }
        ),
    },
    ["etcd"],
)

_FEED = _obj(
    {
        "id": _STR,
        "namespace": _STR,
        "state": _STR,
        "sinkURI": {**_STR, "description": "the sink URL, password masked"},
        "checkpointTS": _INT,
        "checkpointTime": {**_STR, "description": "RFC 3339 time of checkpointTS"},
        "error": _STR,
    }
)
_NODE = _obj({"nodeId": _STR, "addr": _STR, "state": _STR, "maxCommitTS": _INT, "updateTS": _INT})
_CONDITION = _obj(
    {
        "type": _STR,
        "status": {**_STR, "enum": ["True", "False", "Unknown"]},
        "reason": _STR,
        "message": _STR,
        "lastTransitionTime": {**_STR, "format": "date-time"},
    },
    ["type", "status"],
)
STATUS = _obj(
    {
        "observedGeneration": _INT,
        "pumpReplicas": {"type": "integer"},
        "pumpSelector": _STR,
        "drainerCount": {"type": "integer"},
        "pumps": {"type": "array", "items": _NODE},
        "drainers": {"type": "array", "items": _NODE},
        "changefeeds": {"type": "array", "items": _FEED},
        "conditions": {"type": "array", "items": _CONDITION},
    },
)


def crd() -> dict[str, Any]:
    ready = '.status.conditions[?(@.type=="Ready")].status'
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": ["bc"],
                "categories": ["all", "binlog"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": _obj({"spec": SPEC, "status": STATUS})},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.pumps.replicas",
                            "statusReplicasPath": ".status.pumpReplicas",
                            "labelSelectorPath": ".status.pumpSelector",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Pumps", "type": "integer", "jsonPath": ".spec.pumps.replicas"},
                        {"name": "Current", "type": "integer", "jsonPath": ".status.pumpReplicas"},
                        {
                            "name": "Drainers",
                            "type": "integer",
                            "jsonPath": ".status.drainerCount",
                            "priority": 1,
                        },
                        {"name": "Ready", "type": "string", "jsonPath": ready},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
            ],
        },
    }


def main() -> None:
    """Print the CRD as one YAML document (key order as built, for stable diffs)."""
    import yaml

    sys.stdout.write("# Generated by `python -m binlog_operator.crd`; do not edit.\n")
    plain = json.loads(json.dumps(crd()))  # no shared sub-dicts, so no YAML anchors
    sys.stdout.write(yaml.safe_dump(plain, sort_keys=False))


if __name__ == "__main__":
    main()
