"""The Kafka outputs over mutual TLS on a real broker (an SSL listener requiring a client
certificate), and a rotation to a new CA while one sink stays open.

The drainer's ``kafka://`` sink names its files as the operator renders a mounted Secret
(``kafka-ssl-ca``/``-cert``/``-key`` under a directory updated the way the kubelet updates a
Secret volume). The rotation takes the three steps people take on both sides (trust both CAs,
present the new certificates, trust the new CA only); the broker is restarted after each step,
so the sink's next connection is a new handshake. At step 2 the broker presents a certificate of
the new CA, which the sink's files did not trust when it opened; at step 3 it trusts only the
new CA, so the sink must present its new certificate. Every batch arrives, and afterwards a
client of the old CA or with the old certificate is refused. The changefeed's ``kafka://`` sink
(``ca``/``cert``/``key``) writes over the same listener.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.kafka_read import read_at_least
from tests.support.tls_rotation import SecretVolume, make_rotation
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.kafka.secondary import decode_txn
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

T = TableInfo.build("db", "t", [("id", "bigint"), ("v", "int")], ["id"])
OPTS = SinkOptions(cluster_id=4242)


def txn(ts: int) -> Txn:
    return Txn(ts, ts - 1, rows=(RowChange.insert(T, {"id": ts, "v": ts}),))


def drainer_url(broker: KafkaBroker, ca: str, cert: str, key: str) -> str:
    return (
        f"kafka://{broker.tls_bootstrap}/secure?ack-timeout=10"
        f"&kafka-ssl-ca={ca}&kafka-ssl-cert={cert}&kafka-ssl-key={key}"
    )


async def test_kafka_sink_over_mutual_tls_follows_a_ca_rotation_without_reopening(
    kafka_factory: Callable[..., KafkaBroker], tmp_path: Path
) -> None:
    rotation = make_rotation(tmp_path / "pki", cn="kafka")
    server = SecretVolume(tmp_path / "broker-tls", rotation.files("old", "old"))
    client = SecretVolume(tmp_path / "drainer-tls", rotation.files("old", "old"))
    broker = kafka_factory(tls=server.directory)
    url = drainer_url(broker, client.path("ca.crt"), client.path("tls.crt"), client.path("tls.key"))

    async with open_sink(url, OPTS) as sink:
        await sink.apply([txn(10)])
        for step, (ca, leaf) in enumerate(rotation.STEPS[1:], start=1):
            client.update(rotation.files(ca, leaf))
            server.update(rotation.files(ca, leaf))
            broker.write_config()
            broker.restart()  # every connection of the sink is gone: the next is a handshake
            await sink.apply([txn(10 + step)])

    got = await read_at_least(broker.bootstrap, "secure", 4)
    assert [decode_txn(m.value).commit_ts for m in got] == [10, 11, 12, 13]

    # the broker now trusts the new CA only and presents the new certificate
    old = rotation.security("old", "old")
    with pytest.raises(SinkError):  # trusts only the old CA: the broker's certificate fails
        async with open_sink(drainer_url(broker, old.ssl_ca, old.ssl_cert, old.ssl_key), OPTS):
            pass
    stale = rotation.security("new", "old")
    with pytest.raises(SinkError):  # presents the old certificate: the broker refuses it
        async with open_sink(
            drainer_url(broker, stale.ssl_ca, stale.ssl_cert, stale.ssl_key), OPTS
        ) as sink:
            await sink.apply([txn(20)])
    fresh = rotation.security("new", "new")
    cdc = (
        f"kafka://{broker.tls_bootstrap}/cdc?protocol=canal-json&ack-timeout=10"
        f"&ca={fresh.ssl_ca}&cert={fresh.ssl_cert}&key={fresh.ssl_key}"
    )
    ddl = Txn(30, ddl=Ddl("db", "create table t (id bigint primary key, v int)", "t"))
    async with open_sink(cdc, OPTS) as sink:
        await sink.apply([ddl, txn(31)])
    assert len(await read_at_least(broker.bootstrap, "cdc", 2)) >= 2
    assert len(await read_at_least(broker.bootstrap, "secure", 4)) == 4  # nothing from the refused
