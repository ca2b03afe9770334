"""What the operator's CRDs share (pure): OpenAPI schema building blocks, a condition, a
drainer's fields and the CRD envelope.

``crd`` builds the BinlogCluster from these and ``nodecrd`` the Pump and Drainer, so a drainer
is described once: the BinlogCluster's ``spec.drainers[]`` entry (``DRAINER_ITEM``) is the
Drainer resource's spec but for ``cluster``. Invariant: this module imports no other CRD
module; they import it.
"""

from __future__ import annotations

from typing import Any

from binlog_operator import GROUP, VERSION

Schema = dict[str, Any]


def obj(props: Schema, required: list[str] | None = None, **extra: Any) -> Schema:
    s: Schema = {"type": "object", "properties": props, **extra}
    if required:
        s["required"] = required
    return s


FREE: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer", "format": "int64"}
STORAGE = obj({"size": {**STR, "default": "10Gi"}, "storageClassName": STR})
POSITIVE: Schema = {"type": "integer", "minimum": 1}
# no defaults here: the operator's (spec.py) apply, and a key given without kubernetes is refused
_CATCHUP = obj(
    {
        "kubernetes": {
            "type": "boolean",
            "description": "executors as pods (Spark-on-Kubernetes, client mode); "
            "false: local[*] in the drainer's pod",
        },
        "stagingClaim": {
            **STR,
            "description": "existing ReadWriteMany PersistentVolumeClaim for the staged ranges "
            "(required with kubernetes)",
        },
        "stagingMount": {**STR, "description": "where drainer and executors mount it (/staging)"},
        "serviceAccount": {
            **STR,
            "description": "account of the drainer pod and executors (the chart's Spark account)",
        },
        "executors": POSITIVE,
        "executorCores": POSITIVE,
        "executorMemory": {**STR, "description": "JVM size per executor, e.g. 2g (1g)"},
    },
    description="Spark catch-up of a backlog ([syncer.catchup] enabled)",
)

SECRET_REF = {**STR, "description": "a Secret in the cluster's namespace"}
# no defaults here either: spec.py/kafkasink.py apply them and list every problem at once
KAFKA = obj(
    {
        "brokers": {"type": "array", "minItems": 1, "items": STR, "description": "host:port"},
        "topic": {**STR, "description": "topic (default <cluster-id>_obinlog)"},
        "exactlyOnce": {
            "type": "boolean",
            "description": "each batch and its checkpoint in one Kafka transaction",
        },
        "transactionalId": {**STR, "description": "with exactlyOnce (tributary-<topic>)"},
        "partitionBy": {**STR, "enum": ["fixed", "table", "key"]},
        "messagePer": {**STR, "enum": ["txn", "row"]},
        "maxMessages": POSITIVE,
        "maxMessageSize": {**POSITIVE, "description": "bytes"},
        "clientId": STR,
        "sasl": obj(
            {
                "secretName": SECRET_REF,
                "mechanism": {**STR, "enum": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]},
                "userKey": {**STR, "description": "key of the user (username)"},
                "passwordKey": {**STR, "description": "key of the password (password)"},
            },
            ["secretName"],
            description="SASL credentials, passed to the drainer as env from the Secret",
        ),
        "tls": obj(
            {
                "secretName": SECRET_REF,
                "caKey": {**STR, "description": "key of the CA (ca.crt)"},
                "certKey": {**STR, "description": "key of a client certificate"},
                "keyKey": {**STR, "description": "key of its private key"},
            },
            ["secretName"],
            description="TLS to the brokers, files mounted from the Secret",
        ),
    },
    ["brokers"],
    description="a Kafka sink (db-type kafka, tidb-binlog's secondary binlog), instead of "
    "sinkURI; credentials come from Secrets, never the ConfigMap",
)

DRAINER_ITEM = obj(
    {
        "name": {**STR, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 30},
        "sinkURI": {
            **STR,
            "description": "mysql://, sqlite://, file://, kafka://host:port/topic?..., "
            "pump://, print://, blackhole:// (required unless sinkURISecret or kafka is given; "
            "it must not hold a password: use sinkURISecret, or kafka.sasl)",
        },
        "sinkURISecret": obj(
            {"name": STR, "key": {**STR, "default": "sink-uri"}},
            ["name"],
            description="the Secret key holding the sink URL (one with a password, e.g. "
            "mysql://user:password@host:3306/), instead of sinkURI; the drainer's pod reads it "
            "as env, the ConfigMap never holds it",
        ),
        "initialState": obj(
            {"name": STR, "key": {**STR, "default": "drainer-state.json"}},
            ["name"],
            description="the ConfigMap key holding a drainer state exported by binlogctl "
            "export-drainer-state: the drainer's first start checks it (cluster ID, the "
            "downstream's checkpoint) and continues after its checkpoint",
        ),
        "kafka": KAFKA,
        "storage": STORAGE,
        "resources": FREE,
        "config": {**FREE, "description": "extra drainer.toml keys"},
        "catchup": _CATCHUP,
    },
    ["name"],
)

CONDITION = obj(
    {
        "type": STR,
        "status": {**STR, "enum": ["True", "False", "Unknown"]},
        "reason": STR,
        "message": STR,
        "lastTransitionTime": {**STR, "format": "date-time"},
    },
    ["type", "status"],
)


def definition(
    kind: str,
    plural: str,
    short_names: list[str],
    spec: Schema,
    status: Schema,
    subresources: dict[str, Any],
    columns: list[dict[str, Any]],
) -> dict[str, Any]:
    """A namespaced CRD of group ``binlog.io`` with one served and stored version."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["all", "binlog"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": obj({"spec": spec, "status": status})},
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }
