"""Which drainers' objects are stale: owned by this cluster, labelled, and not in the spec."""

from __future__ import annotations

from typing import Any

from binlog_operator.drainers import drainer_pod, selector, stale_names
from binlog_operator.manifests import build
from binlog_operator.spec import parse

UID = "uid-1"


def spec(*drainers: str) -> Any:
    return parse(
        {
            "etcd": {"endpoints": ["http://etcd:2379"]},
            "drainers": [{"name": d, "sinkURI": "file:///x"} for d in drainers],
        }
    )


def test_drainers_left_out_of_the_spec_are_found_from_what_the_operator_built() -> None:
    built = build("c", "ns", UID, spec("keep", "gone", "also-gone"), 3)
    assert stale_names(built, UID, {"keep", "gone", "also-gone"}) == []
    assert stale_names(built, UID, {"keep"}) == ["also-gone", "gone"]
    # pumps and captures carry no drainer label; another owner's objects are not ours
    assert stale_names(built, "other-uid", {"keep"}) == []
    assert drainer_pod("c", "gone") == "c-drainer-gone-0"


def test_the_selector_matches_the_drainer_objects_only() -> None:
    built = build("c", "ns", UID, spec("d"), 1)
    pairs = dict(p.split("=") for p in selector("c").split(","))
    matched = [
        (o["kind"], o["metadata"]["name"])
        for o in built
        if all(o["metadata"]["labels"].get(k) == v for k, v in pairs.items())
    ]
    assert sorted(matched) == [
        ("ConfigMap", "c-drainer-d"),
        ("Service", "c-drainer-d"),
        ("StatefulSet", "c-drainer-d"),
    ]
