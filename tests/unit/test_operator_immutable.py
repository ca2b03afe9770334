"""Settings that cannot change in place: a drainer's sink type once it has a checkpoint, the
cluster id behind ``spec.etcd.endpoints``, a volume; each refusal says what runs and what to do."""

from __future__ import annotations

from typing import Any

import pytest

from binlog_operator.immutable import (
    SINK_TYPE,
    etcd_change,
    running_sink_type,
    sink_change,
    sink_type,
    storage_change,
)
from binlog_operator.manifests import build
from binlog_operator.spec import parse, parse_drainer


def drainer(**fields: Any) -> Any:
    return parse_drainer(fields, "down")


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"sinkURI": "mysql://root@db:3306/"}, "mysql"),
        ({"sinkURI": "TiDB://root@db:4000/"}, "mysql"),  # an alias is the same sink
        ({"sinkURI": "file:///var/lib/binlog/out"}, "file"),
        ({"kafka": {"brokers": ["k:9092"]}}, "kafka"),
        ({"sinkURISecret": {"name": "down-sink"}}, None),  # never read by the operator
    ],
)
def test_the_sink_type_of_a_drainer(fields: dict[str, Any], kind: str | None) -> None:
    assert sink_type(drainer(**fields)) == kind


def test_the_drainer_stateful_set_records_its_sink_type() -> None:
    raw = {
        "etcd": {"endpoints": ["http://etcd:2379"]},
        "drainers": [
            {"name": "down", "sinkURI": "mysql://root@db:3306/"},
            {"name": "secret", "sinkURISecret": {"name": "s"}},
        ],
    }
    objs = {o["metadata"]["name"]: o for o in build("c", "ns", "u", parse(raw), 1)}
    assert running_sink_type(objs["c-drainer-down"]) == "mysql"
    assert objs["c-drainer-down"]["metadata"]["annotations"] == {SINK_TYPE: "mysql"}
    assert running_sink_type(objs["c-drainer-secret"]) is None
    assert running_sink_type(None) is None


def test_a_sink_type_change_is_refused_once_there_is_a_checkpoint() -> None:
    why = sink_change("down", "mysql", "file", checkpoint_ts=449210000000000000)
    assert why is not None
    assert why.startswith("drainer down: its sink type cannot change from mysql to file in place")
    assert "449210000000000000" in why and "add a new drainer" in why
    assert sink_change("down", "mysql", "file", checkpoint_ts=0) is None  # nothing saved yet
    assert sink_change("down", "mysql", "mysql", checkpoint_ts=5) is None  # another URL, same type
    assert sink_change("down", None, "file", checkpoint_ts=5) is None  # a Secret's: unknown
    assert sink_change("down", "mysql", None, checkpoint_ts=5) is None


def test_the_etcd_may_change_only_to_one_holding_the_same_cluster_id() -> None:
    old, new = ["http://etcd-0:2379"], ["http://etcd-0:2379", "http://etcd-1:2379"]
    assert etcd_change(old, new, "42", found_id=42) is None  # another member of the same etcd
    assert etcd_change(old, list(reversed(old)), "42", found_id=None) is None  # same endpoints
    assert etcd_change([], new, None, found_id=7) is None  # nothing applied yet
    assert etcd_change(old, new, None, found_id=7) is None  # no cluster id recorded yet
    other = etcd_change(old, ["http://other:2379"], "42", found_id=7)
    assert other is not None
    assert other.startswith("spec.etcd.endpoints: the cluster id cannot change in place")
    assert "cluster 42" in other and "holds cluster id 7" in other
    empty = etcd_change(old, ["http://fresh:2379"], "42", found_id=None)
    assert empty is not None and "holds no cluster id" in empty


def _claim(size: str) -> dict[str, Any]:
    return {"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": size}}}}


def test_a_drainer_volume_change_is_named() -> None:
    assert storage_change("c-drainer-d", [_claim("1Gi")], [_claim("1Gi")]) is None
    why = storage_change("c-drainer-d", [_claim("1Gi")], [_claim("5Gi")])
    assert why == (
        "c-drainer-d: the volume cannot change in place (a StatefulSet's claim templates are "
        "fixed): keeping data: 1Gi, not data: 5Gi"
    )
