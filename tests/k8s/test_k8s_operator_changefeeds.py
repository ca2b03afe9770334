"""The operator against a real kube-apiserver keeps a BinlogCluster's declared changefeeds on a
real capture cluster: a real capture process (upstream MariaDB, etcd) and a real Kafka broker
with a SASL listener.

``captures.changefeeds`` declares a canal-json Kafka changefeed whose SASL credentials come from
a Secret (with content-compatible, kafka-version and ack-timeout from the spec: the messages
carry Canal's full column types), and a plain one. The operator creates both through the
capture's HTTP API (the Kafka one reaches the broker through its SASL listener, so the
credentials arrived), reports their state with the password masked, moves the Kafka one to
another topic when the spec changes (paused, updated, resumed: the rows written after land in
the new topic), removes the plain one when it leaves the spec, and leaves a changefeed made by
hand alone. A changefeed whose Secret is missing, or whose claim-check PersistentVolumeClaim
does not exist, is shown ``pending`` with the reason.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from tests.support.capture import start_capture, write_shop
from tests.support.k8s import InstalledChart, eventually_async, run_operator
from tests.support.k8s_cluster import FAST, apply, cluster
from tests.support.kafka_read import read_partition
from tests.support.procs import stop_process
from tests.support.waits import until
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import ChangeFeedInfo
from tributary.coord.etcd import EtcdKv

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.etcd import EtcdProcess
    from tests.support.kafka import KafkaBroker
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.kafka", "tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(300)]

NS = "operator-feeds"
PASSWORD = "feed/p@ss"


def secrets(up_url: str) -> dict[str, Any]:
    def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded}

    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            secret("kafka-user", {"username": "app", "password": PASSWORD}),
            secret("upstream", {"url": up_url}),
        ],
    }


def feeds_status(kube: Any) -> dict[str, dict[str, Any]]:
    body = kube.get("bc", "cf", "-n", NS) or {}
    return {f["id"]: f for f in (body.get("status") or {}).get("changefeeds") or []}


async def rows_in(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    try:
        records = await read_partition(bootstrap, topic)
    except AssertionError:  # no topic yet
        return []
    return [json.loads(r.value) for r in records if r.value]


# open-protocol with claim check into a claim nobody created
NO_CLAIM = {
    "protocol": "open-protocol",
    "largeMessageHandleOption": "claim-check",
    "claimCheckVolumeClaim": "big-rows",
}


async def test_declared_changefeeds_are_created_updated_and_removed_on_real_captures(
    binlog_chart: InstalledChart,
    etcd: EtcdProcess,
    kafka_factory: Callable[..., KafkaBroker],
    mariadb_instance: InstanceFactory,
    tmp_path: Path,
) -> None:
    kube = binlog_chart.kube
    broker = kafka_factory(sasl_users={"app": PASSWORD})
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    await up.execute("CREATE DATABASE shop")
    await up.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(32))")
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4471", tmp_path / "c.log")
    addresses = tmp_path / "pods.json"
    addresses.write_text(json.dumps({f"{NS}/cf-capture-0": f"127.0.0.1:{port}"}))
    env = {**FAST, "BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(addresses)}
    kube.kubectl("create", "namespace", NS)
    apply(kube, NS, secrets(up.dsn()))
    kafka = {
        "brokers": [broker.sasl_bootstrap],
        "topic": "orders",
        "protocol": "canal-json",
        "partitionNum": 1,
        "contentCompatible": True,
        "kafkaVersion": "2.4.0",
        "ackTimeout": 20,
        "sasl": {"secretName": "kafka-user"},
    }
    declared = [
        {"id": "to-kafka", "kafka": kafka},
        {"id": "audit", "sinkURI": "blackhole://"},
        {"id": "no-secret", "kafka": {**kafka, "sasl": {"secretName": "missing"}}},
        {
            "id": "no-claim",
            "kafka": {**{k: v for k, v in kafka.items() if k != "contentCompatible"}, **NO_CLAIM},
        },
    ]

    def spec(feeds: list[dict[str, Any]]) -> dict[str, Any]:
        captures = {
            "replicas": 1,
            "upstreamSecret": {"name": "upstream", "key": "url"},
            "changefeeds": feeds,
        }
        return cluster("cf", etcd.endpoint, 0, captures=captures)

    try:
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{port}/api/v2/changefeeds"

            async def by_hand() -> bool:
                try:
                    body = {"changefeed_id": "by-hand", "sink_uri": "blackhole://"}
                    async with http.post(base, json=body) as r:
                        return r.status == 200
                except aiohttp.ClientError:
                    await asyncio.sleep(0.5)
                    return False  # the capture is starting

            await until(by_hand, 60)
            with run_operator(binlog_chart, NS, tmp_path, env):
                apply(kube, NS, spec(declared))
                await eventually_async(
                    lambda: all(
                        feeds_status(kube).get(i, {}).get("state") == "normal"
                        for i in ("to-kafka", "audit")
                    ),
                    "to-kafka and audit normal",
                )
                shown = feeds_status(kube)
                assert shown["to-kafka"]["sinkURI"] == (
                    f"kafka://app:******@{broker.sasl_bootstrap}/orders?protocol=canal-json"
                    "&partition-num=1&content-compatible=true&kafka-version=2.4.0"
                    "&ack-timeout=20&sasl-mechanism=PLAIN"
                )
                assert PASSWORD not in json.dumps(kube.get("bc", "cf", "-n", NS))
                pending = shown["no-secret"]
                assert pending["state"] == "pending"
                assert f"Secret {NS}/missing does not exist" in pending["error"]
                unclaimed = shown["no-claim"]  # read with the chart's RBAC: get on claims
                assert unclaimed["state"] == "pending"
                assert (
                    f"PersistentVolumeClaim {NS}/big-rows (claimCheckVolumeClaim) does not exist"
                    in unclaimed["error"]
                )
                async with EtcdKv.connect([etcd.endpoint]) as kv:
                    (raw,) = [
                        r.value
                        for r in await kv.get_prefix(
                            Keys("default").info_key(FeedId("default", "to-kafka"))
                        )
                    ]
                assert "app:feed%2Fp%40ss@" in ChangeFeedInfo.from_json(raw).sink_uri

                # rows reach the topic through the SASL listener
                await write_shop(up, ["INSERT INTO items VALUES (1, 'one'), (2, 'two')"])

                async def inserted(topic: str, ids: set[str]) -> bool:
                    seen = {
                        row["id"]
                        for m in await rows_in(broker.bootstrap, topic)
                        if m.get("type") == "INSERT"
                        for row in m.get("data") or []
                    }
                    return ids <= seen

                await until(lambda: inserted("orders", {"1", "2"}), 60)
                # content-compatible reached the capture: Canal's full column types
                types = [
                    m["mysqlType"]
                    for m in await rows_in(broker.bootstrap, "orders")
                    if m.get("type") == "INSERT"
                ]
                assert types[0] == {"id": "int(11)", "name": "varchar(32)"}

                # another topic: paused, updated, resumed; audit leaves the spec
                moved = {**kafka, "topic": "orders-v2"}
                apply(kube, NS, spec([{"id": "to-kafka", "kafka": moved}]))
                await eventually_async(
                    lambda: (
                        "/orders-v2?" in feeds_status(kube)["to-kafka"]["sinkURI"]
                        and "audit" not in feeds_status(kube)
                    ),
                    "to-kafka moved, audit removed",
                )
                assert feeds_status(kube)["to-kafka"]["state"] == "normal"
                await write_shop(up, ["INSERT INTO items VALUES (3, 'three')"])
                await until(lambda: inserted("orders-v2", {"3"}), 60)
                assert "3" not in {
                    row["id"]
                    for m in await rows_in(broker.bootstrap, "orders")
                    for row in m.get("data") or []
                }
                # made by hand: never the operator's to remove
                status = kube.get("bc", "cf", "-n", NS)["status"]
                assert [m["id"] for m in status["managedChangefeeds"]] == ["to-kafka"]
                assert "by-hand" in feeds_status(kube)
                async with http.get(f"{base}/by-hand") as r:
                    assert r.status == 200
    finally:
        stop_process(capture, 20)
