"""BinlogCluster spec parsing: defaults, and every problem reported at once."""

from __future__ import annotations

import pytest

from binlog_operator.spec import DEFAULT_IMAGE, SecretKey, SpecError, parse

ETCD = {"endpoints": ["http://etcd:2379"]}


def test_defaults_fill_an_almost_empty_spec() -> None:
    spec = parse({"etcd": ETCD})
    assert spec.etcd_endpoints == ("http://etcd:2379",)
    assert spec.image == DEFAULT_IMAGE
    assert spec.pumps.replicas == 3 and spec.pumps.storage.size == "10Gi"
    assert spec.drainers == () and spec.captures.replicas == 0 and spec.tls_secret is None


def test_the_operator_default_image_applies_only_when_the_spec_names_none() -> None:
    assert parse({"etcd": ETCD}, default_image="reg/t:1").image == "reg/t:1"
    assert parse({"etcd": ETCD, "image": "mine:2"}, default_image="reg/t:1").image == "mine:2"


def test_drainers_are_parsed_in_order() -> None:
    spec = parse(
        {
            "etcd": ETCD,
            "drainers": [
                {
                    "name": "mysql",
                    "sinkURI": "mysql://root@db:3306/",
                    "config": {"worker-count": 4},
                },
                {
                    "name": "files",
                    "sinkURI": "file:///data",
                    "storage": {"size": "1Gi", "storageClassName": "fast"},
                },
            ],
        }
    )
    assert [d.name for d in spec.drainers] == ["mysql", "files"]
    assert spec.drainers[0].config == {"worker-count": 4}
    assert spec.drainers[1].storage.storage_class == "fast"


def test_every_problem_is_reported_in_one_error() -> None:
    with pytest.raises(SpecError) as caught:
        parse(
            {
                "etcd": {"endpoints": ["etcd:2379"]},
                "pumps": {"replicas": -1, "storage": {"size": "lots"}},
                "drainers": [
                    {"name": "Bad_Name", "sinkURI": "nowhere"},
                    {"name": "x", "sinkURI": "sqlite:///a"},
                    {"name": "x", "sinkURI": "sqlite:///b"},
                ],
                "captures": {"replicas": "two"},
                "imagePullPolicy": "Sometimes",
            }
        )
    problems = caught.value.problems
    assert len(problems) == 8, problems
    for fragment in [
        "etcd.endpoints",
        "pumps.replicas",
        "pumps.storage.size",
        "drainers[0].name",
        "drainers[0].sinkURI",
        "name 'x' is used twice",
        "captures.replicas",
        "imagePullPolicy",
    ]:
        assert any(fragment in p for p in problems), fragment
    assert caught.value.retriable is False


def test_captures_need_the_secret_holding_the_upstream_url() -> None:
    base = {"etcd": {"endpoints": ["http://etcd:2379"]}}
    with pytest.raises(SpecError, match=r"captures\.upstreamSecret: required"):
        parse({**base, "captures": {"replicas": 1}})
    with pytest.raises(SpecError, match=r"captures\.upstreamSecret\.name"):
        parse({**base, "captures": {"replicas": 1, "upstreamSecret": {"name": "Not A Name"}}})
    spec = parse(
        {**base, "captures": {"replicas": 1, "upstreamSecret": {"name": "db", "key": "url"}}}
    )
    assert spec.captures.upstream == SecretKey("db", "url")
    assert parse({**base, "captures": {"replicas": 0}}).captures.upstream is None


def test_etcd_endpoints_are_required() -> None:
    with pytest.raises(SpecError, match="at least one endpoint"):
        parse({"pumps": {"replicas": 1}})


def test_a_section_of_the_wrong_type_is_a_problem_not_a_crash() -> None:
    with pytest.raises(SpecError, match="pumps: must be an object"):
        parse({"etcd": ETCD, "pumps": [1, 2]})
