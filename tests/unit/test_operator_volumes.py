"""A pump's volume request: a larger size is a growth, a smaller one, another class or other
claims are refused with what runs and what was asked; quantities compare by bytes; and the
claims to expand are those of the set's ordinals."""

from __future__ import annotations

from typing import Any

from binlog_operator.manifests import build
from binlog_operator.spec import parse
from binlog_operator.volumes import Plan, claim_names, plan, quantity_bytes


def _claim(size: str, cls: str | None = None, name: str = "data") -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"requests": {"storage": size}}}
    if cls:
        spec["storageClassName"] = cls
    return {"metadata": {"name": name}, "spec": spec}


def test_quantities_in_bytes() -> None:
    assert quantity_bytes("1Gi") == 1 << 30
    assert quantity_bytes("1.5Gi") == 3 << 29
    assert quantity_bytes("500M") == 500 * 10**6
    assert quantity_bytes("1073741824") == 1 << 30
    assert quantity_bytes("1Gi") == quantity_bytes("1024Mi")
    assert quantity_bytes("10m") is None and quantity_bytes("big") is None
    assert quantity_bytes(None) is None


def test_a_larger_size_is_a_growth() -> None:
    assert plan("c-pump", [_claim("1Gi")], [_claim("2Gi")]) == Plan(grow={"data": "2Gi"})
    assert plan("c-pump", [_claim("1Gi", "x")], [_claim("2Gi", "x")]).grow == {"data": "2Gi"}


def test_the_same_size_written_otherwise_is_no_change() -> None:
    assert plan("c-pump", [_claim("1Gi")], [_claim("1Gi")]) == Plan()
    assert plan("c-pump", [_claim("1Gi")], [_claim("1024Mi")]) == Plan()


def test_a_smaller_size_is_refused() -> None:
    refused = plan("c-pump", [_claim("2Gi")], [_claim("1Gi")]).refused
    assert refused == (
        "c-pump: a volume cannot shrink (data: 2Gi -> 1Gi): keeping data: 2Gi, not data: 1Gi. "
        "Put back 2Gi or more"
    )


def test_another_class_or_other_claims_are_refused() -> None:
    other_class = plan("c-pump", [_claim("1Gi", "a")], [_claim("2Gi", "b")])
    assert other_class.grow == {}
    assert other_class.refused is not None and "storage class cannot change" in other_class.refused
    assert "keeping data: 1Gi (a), not data: 2Gi (b)" in other_class.refused
    added = plan("c-pump", [_claim("1Gi")], [_claim("1Gi"), _claim("1Gi", name="more")])
    assert added.refused is not None and "added or removed" in added.refused
    assert plan("c-pump", [_claim("1Gi")], [_claim("lots")]).refused is not None


def test_the_claims_to_expand_are_the_sets_ordinals() -> None:
    spec = parse(
        {
            "etcd": {"endpoints": ["http://e:2379"]},
            "image": "tributary:0.1.0",
            "pumps": {"replicas": 3, "storage": {"size": "2Gi"}},
        }
    )
    sts = next(
        o
        for o in build("c", "ns", "uid", spec, 3)
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "c-pump"
    )
    (template,) = sts["spec"]["volumeClaimTemplates"]
    assert template["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert claim_names(sts, template["metadata"]["name"]) == [
        "data-c-pump-0",
        "data-c-pump-1",
        "data-c-pump-2",
    ]
