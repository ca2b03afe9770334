"""The drainer's and the capture's scrapes show the pump client counters of their ``pump://``
sinks: real ``PumpsClient``s (against scripted pumps on loopback) count into the one
``ClientStats`` that ``PumpClientCounters`` hands every such sink, one client after another;
the capture's are per changefeed (``KeyedPumpClientCounters``)."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from services.capture.metrics import CaptureMetrics
from services.drainer.metrics import DrainerMetrics
from tests.support.scripted_pump import ScriptedPump, running_pumps
from tributary.coord.memory import MemoryKv
from tributary.pumpclient import PumpsClient
from tributary.pumpclient.stats import ClientStats
from tributary.registry.status import NodeKind, NodeState, node_key
from tributary.sinks import SinkOptions
from tributary.sinks.pump.counters import KeyedPumpClientCounters, PumpClientCounters
from tributary.telemetry import Metrics

FAST: dict[str, Any] = {"retry_interval": 0.01, "probe_interval": 3600, "write_timeout": 5}
FAMILIES = {
    "drainer": "binlog_drainer_pump_client_events",
    "capture": "ticdc_sink_pump_client_events",
}
LABEL_NAMES = {
    "binlog_drainer_pump_client_events": {"type"},
    "ticdc_sink_pump_client_events": {"namespace", "changefeed", "type"},
}


def scrape(metrics: Metrics, family: str, **labels: str) -> dict[str, float]:
    """``{type: value}`` of ``family``'s counter samples with ``labels``, which must be
    declared."""
    (found,) = [
        f for f in text_string_to_metric_families(metrics.render().decode()) if f.name == family
    ]
    assert found.type == "counter"
    samples = [s for s in found.samples if s.name == family + "_total"]
    assert all(set(s.labels) == LABEL_NAMES[family] for s in samples)
    return {
        s.labels["type"]: s.value
        for s in samples
        if all(s.labels[k] == v for k, v in labels.items())
    }


async def write_txns(kv: MemoryKv, stats: ClientStats | None, start_ts: list[int]) -> None:
    async with PumpsClient(kv, 7, stats=stats, **FAST) as client:
        for ts in start_ts:
            await client.prewrite(ts, b"v%d" % ts, prewrite_key=b"k")
            await client.commit(ts, ts + 1)


async def test_scrapes_show_the_pump_sinks_client_counters() -> None:
    counters = PumpClientCounters()  # the drainer's
    feeds = KeyedPumpClientCounters()  # the capture's: feed A into pump://, B into mysql://
    services: dict[str, Metrics] = {
        "drainer": DrainerMetrics(pump_client=counters.totals),
        "capture": CaptureMetrics(lambda: None, pump_client=feeds.totals),
    }
    labels: dict[str, dict[str, str]] = {
        "drainer": {},
        "capture": {"namespace": "default", "changefeed": "a"},
    }
    mysql = counters.options("mysql://root@127.0.0.1:3306/", SinkOptions(1))
    assert mysql.pump_stats is None
    b = feeds.of(("default", "b")).options("mysql://root@127.0.0.1:3306/", SinkOptions(1))
    assert b.pump_stats is None
    for name, m in services.items():
        assert scrape(m, FAMILIES[name]) == {}, name  # no pump:// sink: no series

    options = counters.options("pump://127.0.0.1:2379/?name=to-pumps", SinkOptions(1))
    assert options.pump_stats is counters.stats
    a = feeds.of(("default", "a"))
    feed_options = a.options("pump://127.0.0.1:2379/?name=to-pumps", SinkOptions(1))
    assert feed_options.pump_stats is a.stats and feeds.of(("default", "a")) is a
    for name, m in services.items():
        got = scrape(m, FAMILIES[name], **labels[name])
        assert set(got) == set(ClientStats.__dataclass_fields__), name
        assert set(got.values()) == {0.0}, name
    assert scrape(services["capture"], FAMILIES["capture"], changefeed="b") == {}

    async with running_pumps(ScriptedPump("a")) as (peer,):
        kv = MemoryKv()
        await kv.put(node_key(NodeKind.PUMP, "a"), peer.record(NodeState.ONLINE).to_json())
        await write_txns(kv, options.pump_stats, [10, 20])
        await write_txns(kv, feed_options.pump_stats, [10, 20])
        for name, m in services.items():
            got = scrape(m, FAMILIES[name], **labels[name])
            assert (got["prewrites_ok"], got["commits_ok"]) == (2, 2), name

        # The sink is opened again (a new client): the counters go on from where they were.
        await write_txns(kv, options.pump_stats, [30])
        await write_txns(kv, feed_options.pump_stats, [30])
        for name, m in services.items():
            got = scrape(m, FAMILIES[name], **labels[name])
            assert (got["prewrites_ok"], got["commits_ok"]) == (3, 3), name
            assert got["batched_binlogs"] == 6, name
