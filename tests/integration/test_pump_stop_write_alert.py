"""A pump at its stop-write floor says so on ``/metrics``, and the chart's alert fires on it.

Two real pumps against a real etcd: one whose ``stop-write-at-available-space`` is above the free
space of any disk (it refuses prewrites), one with a small floor. Each one's
``binlog_pump_storage_stop_write`` is scraped, the samples become the input series of a
``promtool test rules`` unit test of the chart's rule files (``alerts/*.yaml``, which
``promtool check rules`` accepts first): ``tributary_pump_stop_write`` fires for the pump at its
floor and for no other."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from grpclib.exceptions import GRPCError
from prometheus_client.parser import text_string_to_metric_families

from tests.support.components import component
from tests.support.etcd import EtcdProcess
from tests.support.exported_metrics import scrape
from tests.support.pump import pump_config, running_pump
from tests.support.stubs import prewrite, pump_stub, write
from tests.support.waits import until
from tributary.config.pump import StorageConfig
from tributary.coord.cluster_id import ensure_cluster_id
from tributary.coord.etcd import EtcdKv

pytestmark = pytest.mark.etcd

ALERTS = Path(__file__).resolve().parents[2] / "helm" / "binlog-operator" / "alerts"
ALERT = "tributary_pump_stop_write"
STOP_WRITE = "binlog_pump_storage_stop_write"


def sample(text: str, name: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                return float(s.value)
    return None


def rule_files(tmp: Path) -> Path:
    """The chart's two rule files as one Prometheus rule file (the chart's PrometheusRule
    lists both files' groups the same way)."""
    groups = [g for f in sorted(ALERTS.glob("*.yaml")) for g in yaml.safe_load(f.read_text())]
    out = tmp / "rules.yaml"
    out.write_text(yaml.safe_dump({"groups": groups}))
    return out


def the_rule(rules: Path) -> dict[str, Any]:
    groups = yaml.safe_load(rules.read_text())["groups"]
    rule: dict[str, Any] = next(r for g in groups for r in g["rules"] if r.get("alert") == ALERT)
    return rule


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(component("prometheus")), *args], capture_output=True, text=True, timeout=120
    )


async def test_the_stop_write_alert_fires_for_a_pump_at_its_floor(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    full_cfg = pump_config(
        tmp_path / "full",
        etcd.endpoint,
        storage=StorageConfig(stop_write_at_available_space=1 << 60),
    )
    roomy_cfg = pump_config(tmp_path / "roomy", etcd.endpoint)
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        cluster_id = await ensure_cluster_id(kv)
    scraped: dict[str, float] = {}
    async with (
        aiohttp.ClientSession() as http,
        running_pump(full_cfg) as full,
        running_pump(roomy_cfg) as roomy,
    ):
        async with pump_stub(full.addr) as stub:
            with pytest.raises(GRPCError, match="stop-write-at-available-space"):
                await write(stub, cluster_id, prewrite(100))

        async def measured() -> bool:
            for who, pump in (("full", full), ("roomy", roomy)):
                text = await scrape(http, pump.http)
                value = sample(text, STOP_WRITE)
                floor = sample(text, STOP_WRITE + "_at_available_space_bytes")
                assert floor is not None and value is not None, text[-2000:]
                scraped[who] = value
            return scraped["full"] == 1

        await until(measured, within=20)
    assert scraped == {"full": 1.0, "roomy": 0.0}

    rules = rule_files(tmp_path)
    checked = promtool("check", "rules", str(rules))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rule = the_rule(rules)
    expected = [
        {
            "exp_labels": {**rule["labels"], "instance": "full"},
            "exp_annotations": {
                k: v.replace("{{ $labels.instance }}", "full")
                for k, v in rule["annotations"].items()
            },
        }
    ]
    test: dict[str, Any] = {
        "rule_files": [str(rules)],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": [
                    {
                        "series": f'{STOP_WRITE}{{instance="{who}"}}',
                        "values": " ".join([f"{value:g}"] * 8),
                    }
                    for who, value in scraped.items()
                ],
                "alert_rule_test": [
                    {"eval_time": "1m", "alertname": ALERT, "exp_alerts": expected}
                ],
            }
        ],
    }
    unit = tmp_path / "stop_write_test.yaml"
    unit.write_text(yaml.safe_dump(test))
    tested = promtool("test", "rules", str(unit))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # and the same test with the full pump's alert left out fails: the rule really fired
    test["tests"][0]["alert_rule_test"][0]["exp_alerts"] = []
    unit.write_text(yaml.safe_dump(test))
    wrong = promtool("test", "rules", str(unit))
    assert wrong.returncode != 0 and ALERT in wrong.stdout + wrong.stderr
