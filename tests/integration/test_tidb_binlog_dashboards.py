"""tidb-binlog's alert rules (binlog.rules.yml) and Grafana dashboard (binlog.json) find every
pump and drainer metric they query on a real pump and drainer, scraped after some writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.drainer import (
    InOrderSink,
    create_merge_table,
    drainer_config,
    row_value,
    running_drainer,
)
from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.stubs import commit, prewrite, pump_stub, write
from tests.support.waits import eventually
from tributary.coord.cluster_id import ensure_cluster_id
from tributary.coord.etcd import EtcdKv

DATA = Path(__file__).resolve().parents[1] / "data" / "tidb-binlog-v8.1.2"
OUT_OF_SCOPE = {
    "histogram_quantile": "a PromQL function, not a metric",
    "go_goroutines": "the Go runtime's; a Python process exports process_* instead",
    "go_memstats_heap_inuse_bytes": "the Go runtime's; see process_resident_memory_bytes",
}
_NAME = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=\{|\[)")


def rule_metrics() -> set[str]:
    doc = yaml.safe_load((DATA / "binlog.rules.yml").read_text())
    exprs = [r["expr"] for g in doc["groups"] for r in g["rules"]]
    return {n for e in exprs for n in _NAME.findall(e)} | _bare(exprs)


def dashboard_metrics() -> set[str]:
    exprs: list[str] = []

    def walk(o: object) -> None:
        if isinstance(o, dict):
            if isinstance(o.get("expr"), str):
                exprs.append(o["expr"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(json.loads((DATA / "binlog.json").read_text()))
    assert len(exprs) > 10
    return {n for e in exprs for n in _NAME.findall(e)} | _bare(exprs)


def _bare(exprs: list[str]) -> set[str]:
    """Metric names used without a selector, e.g. ``binlog_pump_storage_error_count > 0``."""
    return {n for e in exprs for n in re.findall(r"\b(binlog_[a-z_]+)\b", e)}


def exported(text: str) -> set[str]:
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            if kind == "counter":
                names.add(f"{name}_total")
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


async def scrape(url: str) -> str:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 200
        return await r.text()


async def test_every_rule_and_dashboard_metric_is_exported(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            cluster_id = await ensure_cluster_id(kv)
        async with pump_stub(p.addr) as stub:
            for start in (100, 200, 300):
                await write(stub, cluster_id, prewrite(start))
                await write(stub, cluster_id, commit(start, start + 1))
        cfg = drainer_config(tmp_path / "d", etcd.endpoint, initial_commit_ts=5)
        async with running_drainer(cfg, InOrderSink()) as d:
            names = exported(await scrape(f"{p.http}/metrics"))
            names |= exported(await scrape(f"{d.http}/metrics"))
    wanted = (rule_metrics() | dashboard_metrics()) - set(OUT_OF_SCOPE)
    assert {n for n in wanted if n.startswith("binlog_")} == wanted, wanted
    assert sorted(wanted - names) == []


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(
    got: dict[tuple[str, tuple[tuple[str, str], ...]], float], metric: str, **labels: str
) -> float:
    key = (metric, tuple(sorted(labels.items())))
    assert key in got, f"no sample {metric}{labels}"
    return got[key]


async def test_drainer_families_are_observed_after_applying(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    """A real drainer that pulled and applied row transactions has samples with values in
    each of tidb-binlog's drainer families (events, execute and reach durations, read sizes,
    queue sizes, DDL jobs, errors)."""
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            cluster_id = await ensure_cluster_id(kv)
            version = await create_merge_table(kv)
        async with pump_stub(p.addr) as stub:
            for start in (100, 200, 300):
                await write(stub, cluster_id, prewrite(start, row_value(version, start)))
                await write(stub, cluster_id, commit(start, start + 1))
        sink = InOrderSink()
        cfg = drainer_config(tmp_path / "d", etcd.endpoint, initial_commit_ts=5)
        async with running_drainer(cfg, sink) as d:
            await eventually(lambda: len(sink.txns) == 3)
            got = samples(await scrape(f"{d.http}/metrics"))
    node = p.started.node_id
    assert value(got, "binlog_drainer_event", type="Insert") == 3
    assert value(got, "binlog_drainer_event", type="DDL") == 0
    assert value(got, "binlog_drainer_ddl_jobs_total") >= 0
    assert value(got, "binlog_drainer_error_count", type="unmarshal_binlog") == 0
    assert value(got, "binlog_drainer_execute_duration_time_count") >= 1
    assert value(got, "binlog_drainer_execute_duration_time_sum") > 0
    assert value(got, "binlog_drainer_read_binlog_size_count", nodeID=node) >= 3
    assert value(got, "binlog_drainer_read_binlog_size_sum", nodeID=node) > 0
    assert value(got, "binlog_drainer_binlog_reach_duration_time_count", nodeID=node) >= 3
    inf = value(got, "binlog_drainer_binlog_reach_duration_time_bucket", nodeID=node, le="+Inf")
    assert inf == value(got, "binlog_drainer_binlog_reach_duration_time_count", nodeID=node)
    assert value(got, "binlog_drainer_queue_size", name=f"merge_{node}") >= 0
    assert value(got, "binlog_drainer_queue_size", name="syncer_input") >= 0
    assert value(got, "binlog_drainer_queue_size", name="syncer_buffer") >= 0
