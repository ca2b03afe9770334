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

from binlog_operator import KIND, PLURAL
from binlog_operator.crdschema import (
    CONDITION,
    DRAINER_ITEM,
    FREE,
    INT,
    KAFKA,
    POSITIVE,
    STORAGE,
    STR,
    definition,
    obj,
)
from binlog_operator.feedkafka import AVRO_MODES, CLAIM_CHECK_DIR, DEBEZIUM_MODES
from binlog_operator.nodecrd import drainer_crd, pump_crd

_FEED_KAFKA = obj(
    {
        "brokers": {"type": "array", "minItems": 1, "items": STR, "description": "host:port"},
        "topic": {**STR, "description": "the default topic (DDLs, and rows without topicRule)"},
        "protocol": {**STR, "enum": ["canal-json", "open-protocol", "debezium", "avro"]},
        "partitionNum": POSITIVE,
        "replicationFactor": POSITIVE,
        "maxMessageBytes": {**POSITIVE, "description": "bytes"},
        "dispatcher": {**STR, "enum": ["table", "index-value", "ts"]},
        "topicRule": {**STR, "description": "a table's topic, e.g. {schema}_{table}"},
        "enableTidbExtension": {
            "type": "boolean",
            "description": "canal-json, debezium: commit ts and watermark events; avro: the "
            "_tidb_op, _tidb_commit_ts and _tidb_commit_physical_time fields",
        },
        **{
            name: {"type": "boolean", "description": f"debezium: {text}"}
            for name, text in (
                ("debeziumDisableSchema", "payloads without their schema (false)"),
                ("debeziumOutputOldValue", "an update's before (true)"),
                ("debeziumTombstonesOnDelete", "a null-valued message after each delete (false)"),
                (
                    "debeziumPropagateSourceType",
                    "the source column's type, length and scale in each field's parameters",
                ),
            )
        },
        **{
            name: {**STR, "enum": list(values), "description": f"debezium: {key} ({values[0]})"}
            for name, (key, values) in DEBEZIUM_MODES.items()
        },
        "debeziumSchemaChangeTopic": {
            **STR,
            "description": "debezium: the topic of DDL events (default: their table's topic)",
        },
        "timeZone": {
            **STR,
            "description": "debezium: the zone TIMESTAMP values are read in (UTC)",
        },
        "schemaRegistry": {
            **STR,
            "description": "avro (required): the schema registry, http[s]://[USER:PASSWORD@]HOST:PORT",
        },
        **{
            name: {**STR, "enum": list(values), "description": f"avro: {key} ({values[0]})"}
            for name, (key, values) in AVRO_MODES.items()
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
        "maxBatchSize": {**POSITIVE, "description": "open-protocol: row events per message (16)"},
        "largeMessageHandleOption": {
            **STR,
            "enum": ["none", "claim-check"],
            "description": "a row over maxMessageBytes stops the changefeed naming it (none), "
            "or goes to a file of the claim-check storage and the message carries its location "
            "(claim-check; canal-json needs enableTidbExtension)",
        },
        "claimCheckStorageURI": {
            **STR,
            "description": "with claim-check: file:///DIR, DIR in the claim's mount "
            f"{CLAIM_CHECK_DIR}/<claimCheckVolumeClaim> "
            f"(default {CLAIM_CHECK_DIR}/<claimCheckVolumeClaim>/<id>)",
        },
        "claimCheckVolumeClaim": {
            **STR,
            "description": "with claim-check: an existing PersistentVolumeClaim (ReadWriteMany "
            "with more than one capture) mounted in the capture pods at "
            f"{CLAIM_CHECK_DIR}/<name>; consumers mount it at the same path to read the files",
        },
        "kafkaVersion": {
            **STR,
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
        "sasl": KAFKA["properties"]["sasl"],
        "tls": KAFKA["properties"]["tls"],
    },
    ["brokers", "topic"],
    description="a Kafka sink (TiCDC's canal-json, open-protocol, debezium or avro), instead of "
    "sinkURI; the "
    "SASL credentials are read from the Secret into the sink URL, the TLS files and the "
    "claim-check volume are mounted in the capture pods",
)

_AUTOSCALE = obj(
    {
        "minReplicas": {**POSITIVE, "description": "fewest pumps (1)"},
        "maxReplicas": {**POSITIVE, "description": "most pumps"},
        "targetBinlogsPerSecond": {
            "type": "number",
            "minimum": 0,
            "exclusiveMinimum": True,
            "description": "binlogs a second each pump should write: pumps = ceil(the rate of "
            "all pumps / this), within the bounds",
        },
        "scaleDownStabilization": {
            "x-kubernetes-int-or-string": True,
            "description": "how long the rate must have asked for fewer pumps before one is "
            "taken offline: seconds or a duration such as 90s, 5m (5m)",
        },
    },
    ["maxReplicas", "targetBinlogsPerSecond"],
    description="the operator scales the pumps itself from their write rate (their /metrics), "
    "writing pumps.replicas within the bounds; a removed pump is taken offline first",
)

_GO_DURATION = r"^([0-9]+(\.[0-9]*)?(ns|us|ms|s|m|h))+$"

CHANGEFEED_ITEM = obj(
    {
        "id": {**STR, "pattern": "^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$", "maxLength": 128},
        "sinkURI": {
            **STR,
            "description": "the sink URL, without a password (required unless kafka is given)",
        },
        "kafka": _FEED_KAFKA,
        "storageVolumeClaim": {
            **STR,
            "description": "an existing PersistentVolumeClaim holding a storage sink's files "
            "(sinkURI file:///var/lib/binlog/storage/<claim>[/dir]?protocol=csv|canal-json), "
            "mounted in the capture pods; ReadWriteMany with more than one capture",
        },
        "startTS": {**INT, "description": "where a new changefeed starts (0: now)"},
        "config": {**FREE, "description": "TiCDC's replica config (filter, sink, ...)"},
        "enableSyncPoint": {
            "type": "boolean",
            "description": "TiCDC's sync points into tidb_cdc.syncpoint_v1 downstream "
            "(a mysql:// sinkURI only; default false)",
        },
        "syncPointInterval": {
            **STR,
            "pattern": _GO_DURATION,
            "description": "how often a sync point is written, a Go duration (default 10m, at "
            "least 30s as TiCDC)",
        },
        "syncPointRetention": {
            **STR,
            "pattern": _GO_DURATION,
            "description": "how long sync point rows are kept, a Go duration (default 24h, at "
            "least 1h as TiCDC)",
        },
    },
    ["id"],
    description="a changefeed the operator keeps on the capture cluster (created, updated and "
    "removed through the captures' HTTP API)",
)

SPEC = obj(
    {
        "image": {**STR, "description": "image all components run (default: the operator's)"},
        "imagePullPolicy": {**STR, "enum": ["Always", "IfNotPresent", "Never"]},
        "etcd": obj({"endpoints": {"type": "array", "minItems": 1, "items": STR}}, ["endpoints"]),
        "tls": obj({"secretName": {**STR, "description": "secret with ca.crt, tls.crt, tls.key"}}),
        "pumps": obj(
            {
                "replicas": {"type": "integer", "minimum": 0, "default": 3},
                "storage": STORAGE,
                "resources": FREE,
                "config": {**FREE, "description": "extra pump.toml keys"},
                "autoscale": _AUTOSCALE,
            }
        ),
        "drainers": {"type": "array", "items": DRAINER_ITEM},
        "captures": obj(
            {
                "replicas": {"type": "integer", "minimum": 0, "default": 0},
                "resources": FREE,
                "upstreamSecret": obj(
                    {
                        "name": STR,
                        "key": {**STR, "default": "upstream"},
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

_FEED = obj(
    {
        "id": STR,
        "namespace": STR,
        "state": STR,
        "sinkURI": {**STR, "description": "the sink URL, password masked"},
        "checkpointTS": INT,
        "checkpointTime": {**STR, "description": "RFC 3339 time of checkpointTS"},
        "error": STR,
    }
)
_NODE = obj({"nodeId": STR, "addr": STR, "state": STR, "maxCommitTS": INT, "updateTS": INT})
STATUS = obj(
    {
        "observedGeneration": INT,
        "pumpReplicas": {"type": "integer"},
        "pumpSelector": STR,
        "drainerCount": {"type": "integer"},
        "pumpsOnline": {**STR, "description": "pumps online / pump pods, e.g. 3/3"},
        "drainersOnline": {
            **STR,
            "description": "drainers online / Drainer resources of the cluster, e.g. 1/2",
        },
        "pumps": {"type": "array", "items": _NODE},
        "drainers": {"type": "array", "items": _NODE},
        "changefeeds": {"type": "array", "items": _FEED},
        "managedChangefeeds": {
            "type": "array",
            "items": obj({"id": STR, "configHash": STR}),
            "description": "the changefeeds the operator created (only those it removes)",
        },
        "images": obj(
            {c: STR for c in ("pumps", "drainers", "captures")},
            description="per component, the image versions (tags) its pods run; two, "
            "comma-separated, while a rolling update replaces them",
        ),
        "etcdEndpoints": {
            "type": "array",
            "items": STR,
            "description": "the etcd endpoints of the last applied spec",
        },
        "clusterID": {
            **STR,
            "description": "the cluster id stored in that etcd (pumps' binlogs belong to it; "
            "an etcd holding another is refused)",
        },
        "autoscale": obj(
            {
                "desiredReplicas": {"type": "integer"},
                "reason": {
                    **STR,
                    "description": "the pilot's last look: ScaleUp, ScaleDown, "
                    "Steady, Stabilizing, Measuring, Bounds",
                },
                "binlogsPerSecond": {**STR, "description": "all pumps, measured"},
                "binlogsPerSecondPerPump": STR,
                "lastScaleTime": {**STR, "format": "date-time"},
            },
            description="the auto pilot's figures (spec.pumps.autoscale)",
        ),
        "pumpStorage": {
            "type": "array",
            "items": obj(
                {
                    "pod": STR,
                    "claim": STR,
                    "requested": {**STR, "description": "the claim's request"},
                    "capacity": {**STR, "description": "the claim's capacity (what was grown)"},
                    "availableBytes": {**INT, "description": "free, as the pump last measured"},
                    "stopWriteAtAvailableSpace": {**INT, "description": "the pump's floor"},
                    "stopWrite": {
                        "type": "boolean",
                        "description": "free space at or below the floor: prewrites refused",
                    },
                    "error": {**STR, "description": "why the pump's metrics were not read"},
                }
            ),
            "description": "each pump's volume and free space against its stop-write floor",
        },
        "conditions": {"type": "array", "items": CONDITION},
    },
)


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
        {"name": "Pump Version", "type": "string", "jsonPath": ".status.images.pumps"},
        {"name": "Drainer Version", "type": "string", "jsonPath": ".status.images.drainers"},
        {"name": "Capture Version", "type": "string", "jsonPath": ".status.images.captures"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return definition(KIND, PLURAL, ["bc"], SPEC, STATUS, {"status": {}, "scale": scale}, columns)


def all_crds() -> list[dict[str, Any]]:
    """BinlogCluster, Pump and Drainer, in that order."""
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
