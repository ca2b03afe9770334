"""The CRDs: the chart's copies are the generated ones, and their paths point at real schema
fields."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlog_operator import crd
from binlog_operator.nodecrd import drainer_crd, pump_crd

CHART_CRDS = Path(__file__).resolve().parents[2] / "helm/binlog-operator/crds"


@pytest.mark.parametrize("plural", ["binlogclusters", "pumps", "drainers"])
def test_the_chart_crds_are_the_generated_ones(plural: str) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        crd.main([plural])
    chart = CHART_CRDS / f"{plural}.yaml"
    assert chart.read_text() == out.getvalue(), (
        f"regenerate: python -m binlog_operator.crd --write {CHART_CRDS}"
    )
    (generated,) = [c for c in crd.all_crds() if c["spec"]["names"]["plural"] == plural]
    assert yaml.safe_load(chart.read_text()) == generated


def test_the_chart_has_no_other_crd() -> None:
    assert sorted(p.name for p in CHART_CRDS.iterdir()) == [
        "binlogclusters.yaml",
        "drainers.yaml",
        "pumps.yaml",
    ]


def test_write_regenerates_every_file(tmp_path: Path) -> None:
    crd.main(["--write", str(tmp_path)])
    for path in CHART_CRDS.iterdir():
        assert (tmp_path / path.name).read_text() == path.read_text()


def schema_at(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    node = schema
    for part in json_path.strip(".").split("."):
        node = node["properties"][part]
    return node


@pytest.mark.parametrize("definition", crd.all_crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_printer_paths_name_fields_of_the_schema(definition: dict[str, Any]) -> None:
    (version,) = definition["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert version["subresources"]["status"] == {}
    assert "conditions" in schema["properties"]["status"]["properties"]
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].split("[")[0]
        if path.startswith(".status") or path.startswith(".spec"):
            schema_at(schema, path)  # raises KeyError for a path the schema lacks


def test_the_scale_subresource_is_the_pump_count() -> None:
    (version,) = crd.crd()["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    scale = version["subresources"]["scale"]
    assert schema_at(schema, scale["specReplicasPath"])["type"] == "integer"
    assert schema_at(schema, scale["statusReplicasPath"])["type"] == "integer"
    assert schema_at(schema, scale["labelSelectorPath"])["type"] == "string"
    assert crd.crd()["spec"]["names"]["shortNames"] == ["bc"]


def test_pump_and_drainer_columns_and_names() -> None:
    def columns(c: dict[str, Any]) -> list[str]:
        return [col["name"] for col in c["spec"]["versions"][0]["additionalPrinterColumns"]]

    assert columns(pump_crd()) == [
        "Cluster", "Node ID", "State", "Max Commit TS", "Lag", "Error", "Age",
    ]  # fmt: skip
    assert columns(drainer_crd()) == [
        "Cluster", "Node ID", "State", "Checkpoint", "Lag", "Error", "Age",
    ]  # fmt: skip
    assert pump_crd()["spec"]["names"]["shortNames"] == ["bp"]
    assert drainer_crd()["spec"]["names"]["shortNames"] == ["bd"]
    drainer_spec = drainer_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    # sinkURI or kafka: the operator checks that one of them is given
    assert drainer_spec["properties"]["spec"]["required"] == ["cluster"]
    # a Drainer's own spec takes every field of a spec.drainers[] entry
    entry = crd.DRAINER_ITEM["properties"]
    assert set(entry) <= set(drainer_spec["properties"]["spec"]["properties"])
