"""The chart's dashboards and alerts ask only for metrics our processes export.

The chart is rendered with helm (every monitoring part on); every PromQL expression of the
PrometheusRule and every query of the Grafana dashboards is split into the metric names it
selects, and each name must be among what a real pump, drainer and capture export on
``/metrics`` (started against a real etcd) or in ``NOT_OURS`` with its reason."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.etcd import EtcdProcess
from tests.support.exported_metrics import exported_metric_names
from tests.support.k8s import binaries

pytestmark = pytest.mark.etcd

CHART = Path(__file__).resolve().parents[2] / "helm" / "binlog-operator"

# Metric names used by the chart that no Tributary process exports, and why they may be there.
# Empty today: every dashboard and alert is built on our own exporters (tidb-binlog's alerts on
# histograms we do not have are left out of the rule file, as it says).
NOT_OURS: dict[str, str] = {}

_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects: identifiers that are not functions (followed
    by ``(``), keywords, label matchers (inside ``{}``), grouping labels or durations."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "", expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    found = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        rest = text[m.end() :].lstrip()
        if rest.startswith("(") or m.group().lower() in _KEYWORDS:
            continue
        found.add(m.group())
    return found


def test_metric_names_parses_promql() -> None:
    assert metric_names(
        'histogram_quantile(0.9, sum(rate(a_bucket{method="W"}[5m])) by (le, instance)) > 1'
    ) == {"a_bucket"}
    assert metric_names("(time() - b / 262144 / 1000) > 600 and on (x) c") == {"b", "c"}


def render() -> list[dict[str, object]]:
    helm = binaries() / "helm"
    values = (
        "monitoring.dashboards.enabled=true,monitoring.prometheusRule.enabled=true,"
        "monitoring.serviceMonitor.enabled=true,pumpDisruptionBudget.enabled=true"
    )
    done = subprocess.run(
        [str(helm), "template", "rel", str(CHART), "--set", values],
        capture_output=True,
        text=True,
        check=True,
    )
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def expressions(docs: list[dict[str, object]]) -> dict[str, str]:
    """Where -> expression, for every alert and every dashboard query."""
    out: dict[str, str] = {}
    for doc in docs:
        if doc["kind"] == "PrometheusRule":
            for group in doc["spec"]["groups"]:  # type: ignore[index]
                for rule in group["rules"]:
                    out[f"alert {rule['alert']}"] = rule["expr"]
        if doc["kind"] == "ConfigMap" and str(doc["metadata"]["name"]).endswith("-dashboards"):  # type: ignore[index]
            for key, raw in doc["data"].items():  # type: ignore[attr-defined]
                for panel in json.loads(raw)["panels"]:
                    for target in panel["targets"]:
                        out[f"{key} / {panel['title']}"] = target["expr"]
    return out


async def test_every_chart_expression_uses_exported_metrics(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    docs = render()
    kinds = {d["kind"] for d in docs}
    assert {"PrometheusRule", "ServiceMonitor", "PodDisruptionBudget", "ConfigMap"} <= kinds
    exprs = expressions(docs)
    assert any(w.startswith("alert binlog_drainer_checkpoint_high_delay") for w in exprs)
    assert any(w.startswith("tributary-capture.json") for w in exprs)
    exported = set().union(*(await exported_metric_names(etcd.endpoint, tmp_path)).values())
    missing = {
        where: sorted(metric_names(expr) - exported - NOT_OURS.keys())
        for where, expr in exprs.items()
    }
    assert {w: m for w, m in missing.items() if m} == {}
    assert all(metric_names(e) for e in exprs.values()), "an expression with no metric"
