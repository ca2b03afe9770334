"""The BinlogCluster CustomResourceDefinition and how the operator's CRDs are rendered (pure).

``python -m binlog_operator.crd --write helm/binlog-operator/crds`` writes the chart's copies
(``binlogclusters.yaml`` from here, ``pumps.yaml`` and ``drainers.yaml`` from ``nodecrd``),
checked in; a unit test fails when they differ. Invariant: the scale subresource's spec path is
the pump replica count and its status path is the pump StatefulSet's replica count the operator
last applied, so ``kubectl scale`` and HPA-style tools see pumps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from binlog_operator import GROUP, KIND, PLURAL, VERSION
from binlog_operator.feedkafka import CLAIM_CHECK_DIR

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

_SECRET_REF = {**_STR, "description": "a Secret in the cluster's namespace"}
# no defaults here either: spec.py/kafkasink.py apply them and list every problem at once
_KAFKA = _obj(
    {
        "brokers": {"type": "array", "minItems": 1, "items": _STR, "description": "host:port"},
        "topic": {**_STR, "description": "topic (default <cluster-id>_obinlog)"},
        "exactlyOnce": {
            "type": "boolean",
            "description": "each batch and its checkpoint in one Kafka transaction",
        },
        "transactionalId": {**_STR, "description": "with exactlyOnce (tributary-<topic>)"},
        "partitionBy": {**_STR, "enum": ["fixed", "table", "key"]},
        "messagePer": {**_STR, "enum": ["txn", "row"]},
        "maxMessages": _POSITIVE,
        "maxMessageSize": {**_POSITIVE, "description": "bytes"},
        "clientId": _STR,
        "sasl": _obj(
            {
                "secretName": _SECRET_REF,
                "mechanism": {**_STR, "enum": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]},
                "userKey": {**_STR, "description": "key of the user (username)"},
                "passwordKey": {**_STR, "description": "key of the password (password)"},
            },
            ["secretName"],
            description="SASL credentials, passed to the drainer as env from the Secret",
        ),
        "tls": _obj(
            {
                "secretName": _SECRET_REF,
                "caKey": {**_STR, "description": "key of the CA (ca.crt)"},
                "certKey": {**_STR, "description": "key of a client certificate"},
                "keyKey": {**_STR, "description": "key of its private key"},
            },
            ["secretName"],
            description="TLS to the brokers, files mounted from the Secret",
        ),
    },
    ["brokers"],
    description="a Kafka sink (db-type kafka, tidb-binlog's secondary binlog), instead of "
    "sinkURI; credentials come from Secrets, never the ConfigMap",
)

_FEED_KAFKA = _obj(
    {
        "brokers": {"type": "array", "minItems": 1, "items": _STR, "description": "host:port"},
        "topic": {**_STR, "description": "the default topic (DDLs, and rows without topicRule)"},
        "protocol": {**_STR, "enum": ["canal-json", "open-protocol"]},
        "partitionNum": _POSITIVE,
        "replicationFactor": _POSITIVE,
        "maxMessageBytes": {**_POSITIVE, "description": "bytes"},
        "dispatcher": {**_STR, "enum": ["table", "index-value", "ts"]},
        "topicRule": {**_STR, "description": "a table's topic, e.g. {schema}_{table}"},
        "enableTidbExtension": {
            "type": "boolean",
            "description": "canal-json: commit ts and watermark events",
        },
        "contentCompatible": {
            "type": "boolean",
            "description": "canal-json: Canal's full mysqlType (decimal(10,2)) and an UPDATE's "
            "old with the changed columns only (content-compatible)",
        },
        "onlyOutputUpdatedColumns": {
            "type": "boolean",
            "description": "canal-json: an UPDATE's old with the changed columns only",
        },
        "maxBatchSize": {**_POSITIVE, "description": "open-protocol: row events per message (16)"},
        "largeMessageHandleOption": {
            **_STR,
            "enum": ["none", "claim-check"],
            "description": "a row over maxMessageBytes stops the changefeed naming it (none), "
            "or goes to a file of the claim-check storage and the message carries its location "
            "(claim-check; canal-json needs enableTidbExtension)",
        },
        "claimCheckStorageURI": {
            **_STR,
            "description": "with claim-check: file:///DIR, DIR in the claim's mount "
            f"{CLAIM_CHECK_DIR}/<claimCheckVolumeClaim> "
            f"(default {CLAIM_CHECK_DIR}/<claimCheckVolumeClaim>/<id>)",
        },
        "claimCheckVolumeClaim": {
            **_STR,
            "description": "with claim-check: an existing PersistentVolumeClaim (ReadWriteMany "
            "with more than one capture) mounted in the capture pods at "
            f"{CLAIM_CHECK_DIR}/<name>; consumers mount it at the same path to read the files",
        },
        "kafkaVersion": {
            **_STR,
            "pattern": r"^[0-9]+(\.[0-9]+){1,3}$",
            "description": "TiCDC's kafka-version, e.g. 2.4.0 (accepted; the client negotiates)",
        },
        "autoCreateTopic": {
            "type": "boolean",
            "description": "create missing topics with partitionNum and replicationFactor (true)",
        },
        "ackTimeout": {
            "type": "number",
            "minimum": 0,
            "exclusiveMinimum": True,
            "description": "seconds a batch may wait for the brokers' acks before it is retried "
            "(30)",
        },
        "sasl": _KAFKA["properties"]["sasl"],
        "tls": _KAFKA["properties"]["tls"],
    },
    ["brokers", "topic"],
    description="a Kafka sink (TiCDC's canal-json or open-protocol), instead of sinkURI; the "
    "SASL credentials are read from the Secret into the sink URL, the TLS files and the "
    "claim-check volume are mounted in the capture pods",
)

CHANGEFEED_ITEM = _obj(
    {
        "id": {**_STR, "pattern": "^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$", "maxLength": 128},
        "sinkURI": {
            **_STR,
            "description": "the sink URL, without a password (required unless kafka is given)",
        },
        "kafka": _FEED_KAFKA,
        "startTS": {**_INT, "description": "where a new changefeed starts (0: now)"},
        "config": {**_FREE, "description": "TiCDC's replica config (filter, sink, ...)"},
    },
    ["id"],
    description="a changefeed the operator keeps on the capture cluster (created, updated and "
    "removed through the captures' HTTP API)",
)

DRAINER_ITEM = _obj(
    {
        "name": {**_STR, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 30},
        "sinkURI": {
            **_STR,
            "description": "mysql://, sqlite://, file://, kafka://host:port/topic?..., "
            "pump://, print://, blackhole:// (required unless sinkURISecret or kafka is given; "
            "it must not hold a password: use sinkURISecret, or kafka.sasl)",
        },
        "sinkURISecret": _obj(
            {"name": _STR, "key": {**_STR, "default": "sink-uri"}},
            ["name"],
            description="the Secret key holding the sink URL (one with a password, e.g. "
            "mysql://user:password@host:3306/), instead of sinkURI; the drainer's pod reads it "
            "as env, the ConfigMap never holds it",
        ),
        "kafka": _KAFKA,
        "storage": _STORAGE,
        "resources": _FREE,
        "config": {**_FREE, "description": "extra drainer.toml keys"},
        "catchup": _CATCHUP,
    },
    ["name"],
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
        "drainers": {"type": "array", "items": DRAINER_ITEM},
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
                "changefeeds": {"type": "array", "items": CHANGEFEED_ITEM},
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
        "pumpsOnline": {**_STR, "description": "pumps online / pump pods, e.g. 3/3"},
        "drainersOnline": {
            **_STR,
            "description": "drainers online / Drainer resources of the cluster, e.g. 1/2",
        },
        "pumps": {"type": "array", "items": _NODE},
        "drainers": {"type": "array", "items": _NODE},
        "changefeeds": {"type": "array", "items": _FEED},
        "managedChangefeeds": {
            "type": "array",
            "items": _obj({"id": _STR, "configHash": _STR}),
            "description": "the changefeeds the operator created (only those it removes)",
        },
        "conditions": {"type": "array", "items": _CONDITION},
    },
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
                    "schema": {"openAPIV3Schema": _obj({"spec": spec, "status": status})},
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def crd() -> dict[str, Any]:
    ready = '.status.conditions[?(@.type=="Ready")].status'
    scale = {
        "specReplicasPath": ".spec.pumps.replicas",
        "statusReplicasPath": ".status.pumpReplicas",
        "labelSelectorPath": ".status.pumpSelector",
    }
    columns = [
        {"name": "Pumps", "type": "integer", "jsonPath": ".spec.pumps.replicas"},
        {"name": "Current", "type": "integer", "jsonPath": ".status.pumpReplicas"},
        {"name": "Online", "type": "string", "jsonPath": ".status.pumpsOnline"},
        {"name": "Drainers", "type": "string", "jsonPath": ".status.drainersOnline"},
        {"name": "Ready", "type": "string", "jsonPath": ready},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return definition(KIND, PLURAL, ["bc"], SPEC, STATUS, {"status": {}, "scale": scale}, columns)


def all_crds() -> list[dict[str, Any]]:
    """BinlogCluster, Pump and Drainer, in that order."""
    from binlog_operator.nodecrd import drainer_crd, pump_crd

    return [crd(), pump_crd(), drainer_crd()]


def render(definition: dict[str, Any]) -> str:
    """One CRD as a YAML document (key order as built, for stable diffs)."""
    import yaml

    plain = json.loads(json.dumps(definition))  # no shared sub-dicts, so no YAML anchors
    header = "# Generated by `python -m binlog_operator.crd --write <chart>/crds`; do not edit.\n"
    body: str = yaml.safe_dump(plain, sort_keys=False)
    return header + body


def main(argv: list[str] | None = None) -> None:
    """``--write DIR``: write every CRD to ``DIR/<plural>.yaml`` (the chart's ``crds/``);
    otherwise print the one named (``binlogclusters``, ``pumps`` or ``drainers``; default
    ``binlogclusters``)."""
    args = sys.argv[1:] if argv is None else argv
    crds = {c["spec"]["names"]["plural"]: c for c in all_crds()}
    if args[:1] == ["--write"] and len(args) == 2:
        for plural, c in crds.items():
            Path(args[1], f"{plural}.yaml").write_text(render(c))
        return
    if len(args) > 1 or (args and args[0] not in crds):
        sys.exit(f"usage: python -m binlog_operator.crd [--write DIR | {' | '.join(crds)}]")
    sys.stdout.write(render(crds[args[0] if args else PLURAL]))


if __name__ == "__main__":
    main()
