"""A declared changefeed's Kafka options beyond brokers, topic and credentials: canal-json's
content-compatible and only-output-updated-columns, open-protocol's max-batch-size and claim check
(a PersistentVolumeClaim mounted in the capture pods, the storage URI a directory in it),
kafka-version, auto-create-topic and ack-timeout. Each reaches the sink URL the capture's own
parser reads back, the CRD schema names every field the parser takes, and every misuse is listed
at once."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from binlog_operator import crd
from binlog_operator.feedkafka import (
    CLAIM_CHECK_DIR,
    DISPATCHERS,
    FIELDS,
    LARGE_MESSAGE_OPTIONS,
    PROTOCOLS,
)
from binlog_operator.feedspec import FeedSpec, parse_feeds, sink_uri
from binlog_operator.feedsync import FeedError, FeedSync
from binlog_operator.manifests import build
from binlog_operator.spec import SpecError, parse
from tributary.image import IMAGE_UID
from tributary.sinks.kafka.cdc_base import CdcSettings, parse_url
from tributary.sinks.kafka.claimcheck import ClaimCheck

ETCD = {"endpoints": ["http://etcd-0:2379"]}
UPSTREAM = {"name": "upstream", "key": "url"}
BASE = {"brokers": ["k-0:9092"], "topic": "orders"}
CLAIMS = f"{CLAIM_CHECK_DIR}/big-rows"


def feed(kafka: dict[str, Any], feed_id: str = "orders") -> FeedSpec:
    problems: list[str] = []
    (f,) = parse_feeds([{"id": feed_id, "kafka": {**BASE, **kafka}}], problems)
    assert problems == []
    return f


def read_back(uri: str) -> CdcSettings:
    """What the capture makes of the URL (its protocol switch takes ``protocol`` off first)."""
    parts = urlsplit(uri)
    pairs = parts.query.split("&")
    (protocol,) = [p.partition("=")[2] for p in pairs if p.startswith("protocol=")]
    query = "&".join(p for p in pairs if not p.startswith("protocol="))
    return parse_url(parts._replace(query=query), protocol)


def problems_of(kafka: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as e:
        parse({"etcd": ETCD, "captures": {"changefeeds": [{"id": "f", "kafka": kafka}]}})
    return "\n".join(e.value.problems)


def test_canal_json_options_reach_the_capture() -> None:
    f = feed(
        {
            "protocol": "canal-json",
            "contentCompatible": True,
            "onlyOutputUpdatedColumns": True,
            "kafkaVersion": "2.4.0",
            "autoCreateTopic": False,
            "ackTimeout": 2.5,
        }
    )
    uri = sink_uri(f)
    assert uri == (
        "kafka://k-0:9092/orders?protocol=canal-json&content-compatible=true"
        "&only-output-updated-columns=true&kafka-version=2.4.0&auto-create-topic=false"
        "&ack-timeout=2.5"
    )
    s = read_back(uri)
    assert (s.content_compatible, s.only_updated, s.auto_create) == (True, True, False)
    assert s.ack_timeout == 2.5 and not s.extension


def test_defaults_add_nothing_to_the_url() -> None:
    f = feed(
        {
            "protocol": "canal-json",
            "contentCompatible": False,
            "onlyOutputUpdatedColumns": False,
            "autoCreateTopic": True,
        }
    )
    assert sink_uri(f) == "kafka://k-0:9092/orders?protocol=canal-json"
    s = read_back(sink_uri(f))
    assert (s.content_compatible, s.only_updated, s.auto_create) == (False, False, True)


def test_open_protocol_claim_check_goes_to_a_directory_of_the_claim() -> None:
    f = feed(
        {
            "protocol": "open-protocol",
            "maxBatchSize": 64,
            "largeMessageHandleOption": "claim-check",
            "claimCheckVolumeClaim": "big-rows",
            "ackTimeout": 45,
        }
    )
    uri = sink_uri(f)
    assert uri == (
        "kafka://k-0:9092/orders?protocol=open-protocol&max-batch-size=64"
        "&large-message-handle-option=claim-check"
        "&claim-check-storage-uri=file%3A%2F%2F%2Fvar%2Flib%2Fbinlog%2Fclaim-check%2Fbig-rows"
        "%2Forders&ack-timeout=45"
    )
    s = read_back(uri)
    assert (s.max_batch_size, s.large_message, s.ack_timeout) == (64, "claim-check", 45.0)
    assert s.claim_check_uri == f"file://{CLAIMS}/orders"
    assert str(ClaimCheck(s.claim_check_uri).directory) == f"{CLAIMS}/orders"
    # a directory of one's own inside the claim
    given = feed({**_claim_check(), "claimCheckStorageURI": f"file://{CLAIMS}/shop/"})
    assert read_back(sink_uri(given)).claim_check_uri == f"file://{CLAIMS}/shop/"
    # none: TiCDC's default, the refusal of a large row; nothing in the URL
    assert sink_uri(feed({"protocol": "open-protocol", "largeMessageHandleOption": "none"})) == (
        "kafka://k-0:9092/orders?protocol=open-protocol"
    )


def _claim_check() -> dict[str, Any]:
    return {
        "protocol": "open-protocol",
        "largeMessageHandleOption": "claim-check",
        "claimCheckVolumeClaim": "big-rows",
    }


def capture_pod(feeds: list[dict[str, Any]]) -> dict[str, Any]:
    raw = {
        "etcd": ETCD,
        "captures": {"replicas": 2, "upstreamSecret": UPSTREAM, "changefeeds": feeds},
    }
    built = {(o["kind"], o["metadata"]["name"]): o for o in build("c1", "ns", "u", parse(raw), 1)}
    pod: dict[str, Any] = built[("StatefulSet", "c1-capture")]["spec"]["template"]["spec"]
    return pod


def test_the_capture_pods_mount_each_claim_check_claim_once_writable() -> None:
    other = {**BASE, **_claim_check(), "claimCheckVolumeClaim": "audit-rows"}
    pod = capture_pod(
        [
            {"id": "a", "kafka": {**BASE, **_claim_check()}},
            {"id": "b", "kafka": {**BASE, **_claim_check(), "topic": "b"}},
            {"id": "c", "kafka": other},
        ]
    )
    volumes = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in volumes]
    assert claims == ["audit-rows", "big-rows"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert [mounts[v["name"]]["mountPath"] for v in volumes] == [
        f"{CLAIM_CHECK_DIR}/audit-rows",
        CLAIMS,
    ]
    assert not any(mounts[v["name"]].get("readOnly") for v in volumes)
    assert pod["securityContext"] == {"fsGroup": IMAGE_UID}
    # without claim check the pods stay as they were
    plain = capture_pod([{"id": "a", "kafka": BASE}])
    assert "securityContext" not in plain
    assert not [v for v in plain["volumes"] if "persistentVolumeClaim" in v]


def test_canal_json_claim_check_with_the_tidb_extension() -> None:
    f = feed(
        {
            "protocol": "canal-json",
            "enableTidbExtension": True,
            "largeMessageHandleOption": "claim-check",
            "claimCheckVolumeClaim": "big-rows",
        }
    )
    s = read_back(sink_uri(f))
    assert (s.protocol, s.extension, s.large_message) == ("canal-json", True, "claim-check")
    assert s.claim_check_uri == f"file://{CLAIMS}/orders"


def test_every_misuse_is_listed() -> None:
    canal = problems_of(
        {
            **BASE,
            "protocol": "canal-json",
            "maxBatchSize": 8,
            "largeMessageHandleOption": "claim-check",
            "claimCheckStorageURI": "file:///x",
            "claimCheckVolumeClaim": "c",
            "kafkaVersion": "latest",
            "autoCreateTopic": "no",
            "ackTimeout": 0,
            "onlyOutputUpdatedColumns": 1,
        }
    )
    for expected in (
        "kafka.maxBatchSize: only used with protocol open-protocol",
        "kafka.largeMessageHandleOption: claim-check with protocol canal-json needs "
        "enableTidbExtension: true (the claim's location travels in _tidb)",
        "kafka.claimCheckStorageURI: 'file:///x' must be file:///var/lib/binlog/claim-check/c "
        "or a directory under it",
        "kafka.kafkaVersion: 'latest' must be a version such as 2.4.0",
        "kafka.autoCreateTopic: 'no' must be true or false",
        "kafka.ackTimeout: 0 must be a number of seconds above 0",
        "kafka.onlyOutputUpdatedColumns: 1 must be true or false",
    ):
        assert expected in canal, expected
    opened = problems_of(
        {**BASE, "protocol": "open-protocol", "contentCompatible": True, "maxBatchSize": 0}
    )
    assert "kafka.contentCompatible: only used with protocol canal-json" in opened
    assert "kafka.maxBatchSize: 0 must be an integer of at least 1" in opened
    assert "kafka.claimCheckVolumeClaim: required with claim-check" in problems_of(
        {**BASE, **_claim_check(), "claimCheckVolumeClaim": None}
    )
    assert "kafka.claimCheckVolumeClaim: 'Big_Rows' is not a PersistentVolumeClaim" in (
        problems_of({**BASE, **_claim_check(), "claimCheckVolumeClaim": "Big_Rows"})
    )
    assert "kafka.largeMessageHandleOption: 'handle-key-only' must be one of" in problems_of(
        {**BASE, "protocol": "open-protocol", "largeMessageHandleOption": "handle-key-only"}
    )
    for uri in (
        "s3://bucket/claims",
        "file:///var/lib/cdc",
        f"file://{CLAIM_CHECK_DIR}/other",
        f"file://{CLAIMS}/../other",
        f"file://{CLAIMS}-x",
        f"file://host{CLAIMS}",
    ):
        found = problems_of({**BASE, **_claim_check(), "claimCheckStorageURI": uri})
        assert f"kafka.claimCheckStorageURI: {uri!r} must be file://{CLAIMS}" in found, uri
    none = problems_of(
        {
            **BASE,
            "protocol": "open-protocol",
            "claimCheckStorageURI": f"file://{CLAIMS}",
            "claimCheckVolumeClaim": "big-rows",
        }
    )
    for name in ("claimCheckStorageURI", "claimCheckVolumeClaim"):
        assert f"kafka.{name}: only used with largeMessageHandleOption: claim-check" in none


def test_the_crd_names_every_field_the_operator_takes() -> None:
    schema = crd.CHANGEFEED_ITEM["properties"]["kafka"]["properties"]
    assert set(schema) == FIELDS
    assert schema["protocol"]["enum"] == list(PROTOCOLS)
    assert schema["dispatcher"]["enum"] == list(DISPATCHERS)
    assert schema["largeMessageHandleOption"]["enum"] == list(LARGE_MESSAGE_OPTIONS)
    assert schema["ackTimeout"]["type"] == "number"
    for name in ("contentCompatible", "onlyOutputUpdatedColumns", "autoCreateTopic"):
        assert schema[name]["type"] == "boolean"


class _Claims:
    """What FeedSync asks of the API server here: one GET per object (a fake of our client)."""

    def __init__(self, claims: set[str]) -> None:
        self.claims = claims
        self.gets: list[tuple[str, str]] = []

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> Any:
        self.gets.append((kind, name))
        return {"metadata": {"name": name}} if name in self.claims else None


async def test_a_missing_claim_check_claim_is_the_changefeeds_error() -> None:
    kube = _Claims(set())
    sync = FeedSync(kube, None, None, None, 1.0)  # type: ignore[arg-type]
    seen: dict[str, Any] = {}
    with pytest.raises(FeedError, match=r"PersistentVolumeClaim ns/big-rows .*Pending"):
        await sync._uri("ns", feed(_claim_check()), seen)
    kube.claims.add("big-rows")
    assert await sync._uri("ns", feed(_claim_check(), "other"), {}) == sink_uri(
        feed(_claim_check(), "other")
    )
    # read once per pass, however many changefeeds name it; none asked without claim check
    with pytest.raises(FeedError):
        await sync._uri("ns", feed(_claim_check(), "third"), seen)
    await sync._uri("ns", feed({"protocol": "canal-json"}), seen)
    assert kube.gets == [("PersistentVolumeClaim", "big-rows")] * 2


def test_debezium_options_reach_the_capture() -> None:
    from tributary.sinks.kafka.debezium_sink import DebeziumSettings

    f = feed(
        {
            "protocol": "debezium",
            "enableTidbExtension": True,
            "debeziumDisableSchema": False,
            "debeziumOutputOldValue": False,
            "debeziumTombstonesOnDelete": True,
            "debeziumPropagateSourceType": True,
            "debeziumDecimalHandlingMode": "string",
            "debeziumBigintUnsignedHandlingMode": "precise",
            "debeziumBinaryHandlingMode": "hex",
            "debeziumSchemaChangeTopic": "ddl",
            "timeZone": "Asia/Shanghai",
        }
    )
    uri = sink_uri(f)
    assert uri == (
        "kafka://k-0:9092/orders?protocol=debezium&enable-tidb-extension=true"
        "&debezium-output-old-value=false&debezium-tombstones-on-delete=true"
        "&debezium-propagate-source-type=true&debezium-decimal-handling-mode=string"
        "&debezium-bigint-unsigned-handling-mode=precise&debezium-binary-handling-mode=hex"
        "&debezium-schema-change-topic=ddl&time-zone=Asia%2FShanghai"
    )
    assert read_back(uri).extension
    query = dict(p.split("=", 1) for p in urlsplit(uri).query.split("&"))
    d = DebeziumSettings({k: v.replace("%2F", "/") for k, v in query.items()})
    assert (d.old_value, d.tombstones, d.schema_change_topic) == (False, True, "ddl")
    assert (d.options.decimal, d.options.unsigned_bigint, d.options.binary) == (
        "string", "precise", "hex"
    )  # fmt: skip
    assert d.options.propagate
    assert sink_uri(feed({"protocol": "debezium", "debeziumOutputOldValue": True})) == (
        "kafka://k-0:9092/orders?protocol=debezium"
    )


def test_debezium_misuse_is_listed() -> None:
    text = problems_of(
        {
            **BASE,
            "protocol": "debezium",
            "debeziumDecimalHandlingMode": "exact",
            "timeZone": "",
            "contentCompatible": True,
            "largeMessageHandleOption": "claim-check",
        }
    )
    assert "kafka.debeziumDecimalHandlingMode: 'exact' must be one of precise, string" in text
    assert "kafka.timeZone: must be a non-empty string" in text
    assert "kafka.contentCompatible: only used with protocol canal-json" in text
    assert "protocol debezium has no claim check here" in text
    other = problems_of({**BASE, "protocol": "canal-json", "debeziumSchemaChangeTopic": "x"})
    assert "kafka.debeziumSchemaChangeTopic: only used with protocol debezium" in other


def test_avro_options_reach_the_capture() -> None:
    from urllib.parse import parse_qsl, urlsplit

    from tributary.sinks.kafka.avro_sink import AvroSettings
    from tributary.sinks.kafka.cdc_base import parse_url

    f = feed(
        {
            "protocol": "avro",
            "topicRule": "cdc_{schema}_{table}",
            "schemaRegistry": "http://registry:8081",
            "enableTidbExtension": True,
            "avroDecimalHandlingMode": "string",
            "avroBigintUnsignedHandlingMode": "string",
        }
    )
    uri = sink_uri(f)
    assert uri == (
        "kafka://k-0:9092/orders?protocol=avro&topic-rule=cdc_%7Bschema%7D_%7Btable%7D"
        "&enable-tidb-extension=true&schema-registry=http%3A%2F%2Fregistry%3A8081"
        "&avro-decimal-handling-mode=string&avro-bigint-unsigned-handling-mode=string"
    )
    parts = urlsplit(uri)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "protocol"]
    from urllib.parse import urlencode

    rest = parts._replace(query=urlencode(query))
    s = AvroSettings(dict(query), parse_url(rest, "avro"))
    assert (s.registry, s.options.decimal, s.options.unsigned_bigint) == (
        "http://registry:8081", "string", "string",
    )  # fmt: skip


def test_avro_misuse_is_listed() -> None:
    text = problems_of(
        {
            **BASE,
            "protocol": "avro",
            "avroDecimalHandlingMode": "double",
            "largeMessageHandleOption": "claim-check",
        }
    )
    assert "kafka.topicRule: protocol avro needs a topic per table" in text
    assert "kafka.schemaRegistry: protocol avro needs the schema registry's URL" in text
    assert "kafka.avroDecimalHandlingMode: 'double' must be one of precise, string" in text
    assert "protocol avro has no claim check here" in text
    other = problems_of({**BASE, "protocol": "debezium", "schemaRegistry": "http://r:1"})
    assert "kafka.schemaRegistry: only used with protocol avro" in other
