"""The CRD: the chart's copy is the generated one, and its paths point at real schema fields."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import yaml

from binlog_operator import crd

CHART_CRD = Path(__file__).resolve().parents[2] / "helm/binlog-operator/crds/binlogclusters.yaml"


def test_the_chart_crd_is_the_generated_one() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        crd.main()
    assert CHART_CRD.read_text() == out.getvalue(), (
        "regenerate: python -m binlog_operator.crd > " + str(CHART_CRD)
    )
    assert yaml.safe_load(CHART_CRD.read_text()) == crd.crd()


def schema_at(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    node = schema
    for part in json_path.strip(".").split("."):
        node = node["properties"][part]
    return node


def test_scale_and_printer_paths_name_fields_of_the_schema() -> None:
    (version,) = crd.crd()["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    scale = version["subresources"]["scale"]
    assert schema_at(schema, scale["specReplicasPath"])["type"] == "integer"
    assert schema_at(schema, scale["statusReplicasPath"])["type"] == "integer"
    assert schema_at(schema, scale["labelSelectorPath"])["type"] == "string"
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].split("[")[0]
        if path.startswith(".status") or path.startswith(".spec"):
            schema_at(schema, path)  # raises KeyError for a path the schema lacks
    assert crd.crd()["spec"]["names"]["shortNames"] == ["bc"]
