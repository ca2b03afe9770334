"""Pump and Drainer resources (pure parts): names, ownership, the cluster/drainer split of a
spec, and status from registry records."""

from __future__ import annotations

import pytest

from binlog_operator.nodes import (
    changed,
    drainer_fields,
    drainer_of,
    drainer_resource,
    node_status,
    of_cluster,
    owned_by,
    pump_resource,
)
from binlog_operator.spec import SpecError, parse_cluster, parse_drainer
from binlog_operator.status import online
from tributary.registry.status import NodeState, NodeStatus
from tributary.wire.ts import compose

ETCD = {"endpoints": ["http://etcd:2379"]}


def test_a_pump_resource_shares_its_name_with_the_pod_and_node_id() -> None:
    p = pump_resource("c", "ns", "uid-1", 2)
    assert p["kind"] == "Pump" and p["metadata"]["name"] == "c-pump-2"
    assert p["spec"] == {"cluster": "c", "ordinal": 2}
    (owner,) = p["metadata"]["ownerReferences"]
    assert owner["kind"] == "BinlogCluster" and owner["uid"] == "uid-1" and owner["controller"]
    assert p["metadata"]["labels"]["binlog.io/cluster"] == "c"
    assert owned_by(p, "uid-1") and not owned_by(p, "other")


def test_a_drainer_entry_becomes_a_drainer_named_after_its_statefulset() -> None:
    entry = {"name": "down", "sinkURI": "sqlite:///d.db", "config": {"txn-batch": 5}}
    d = drainer_resource("c", "ns", "uid-1", entry)
    assert d["kind"] == "Drainer" and d["metadata"]["name"] == "c-drainer-down"
    assert d["spec"] == {"cluster": "c", **entry}
    assert drainer_of(d) == ("c", "down")
    assert drainer_fields(d) == {"sinkURI": "sqlite:///d.db", "config": {"txn-batch": 5}}


def test_a_drainer_of_its_own_runs_under_its_name_unless_spec_name_says_otherwise() -> None:
    body = {"metadata": {"name": "audit"}, "spec": {"cluster": "c", "sinkURI": "file:///a"}}
    assert drainer_of(body) == ("c", "audit")
    body["spec"]["name"] = "aud"
    assert drainer_of(body) == ("c", "aud")


def test_of_cluster_keeps_the_cluster_s_resources_by_name() -> None:
    bodies = [
        {"metadata": {"name": "b"}, "spec": {"cluster": "c"}},
        {"metadata": {"name": "x"}, "spec": {"cluster": "other"}},
        {"metadata": {"name": "a"}, "spec": {"cluster": "c"}},
    ]
    assert [b["metadata"]["name"] for b in of_cluster(bodies, "c")] == ["a", "b"]


def test_status_follows_the_registry_record_with_the_lag_from_the_commit_ts() -> None:
    ts = compose(1712905541123, 7)
    record = NodeStatus("c-pump-1", "p:8250", NodeState.ONLINE, max_commit_ts=ts, update_ts=9)
    status = node_status("c-pump-1", record, "maxCommitTS", 1712905546623)
    assert status == {
        "nodeId": "c-pump-1",
        "state": "online",
        "addr": "p:8250",
        "maxCommitTS": ts,
        "commitTime": "2024-04-12T07:05:41.123Z",
        "lagSeconds": 5,
        "updateTS": 9,
    }
    # a clock behind the TSO is no negative lag
    assert node_status("c-pump-1", record, "maxCommitTS", 1712905540000)["lagSeconds"] == 0
    assert not changed(status, node_status("c-pump-1", record, "maxCommitTS", 1712905546999))
    assert changed(status, node_status("c-pump-1", record, "maxCommitTS", 1712905548000))


def test_an_unregistered_node_clears_the_registry_fields() -> None:
    status = node_status("c-drainer-d-0", None, "checkpointTS", 0)
    assert status["state"] == "unregistered" and status["nodeId"] == "c-drainer-d-0"
    assert status["checkpointTS"] is None and status["lagSeconds"] is None
    zero = NodeStatus("c-drainer-d-0", "d:8249", NodeState.ONLINE)
    assert node_status("c-drainer-d-0", zero, "checkpointTS", 5)["lagSeconds"] is None


def test_the_cluster_spec_leaves_drainer_fields_to_the_drainers() -> None:
    raw = {
        "etcd": ETCD,
        "drainers": [{"name": "a", "sinkURI": "nowhere"}, {"name": "b", "sinkURI": "file:///"}],
    }
    spec, entries = parse_cluster(raw)
    assert spec.drainers == () and [e["name"] for e in entries] == ["a", "b"]
    with pytest.raises(SpecError) as e:
        parse_drainer({"sinkURI": "nowhere"}, "a")
    assert e.value.problems == [
        "spec.sinkURI: 'nowhere' must be a URL such as mysql://user@host:3306/"
    ]
    with pytest.raises(SpecError) as e:  # the problem becomes an event: never the password
        parse_drainer({"sinkURI": "u:s3cret@db:3306"}, "a")
    assert e.value.problems == [
        "spec.sinkURI: '...@db:3306' must be a URL such as mysql://user@host:3306/"
    ]
    assert parse_drainer({"sinkURI": "file:///x"}, "b").name == "b"


def test_the_cluster_spec_still_refuses_names_it_cannot_give_a_drainer() -> None:
    raw = {
        "etcd": ETCD,
        "pumps": {"replicas": -1},
        "drainers": [{"name": "a"}, {"name": "a"}, {"name": "Bad_Name"}, "x"],
    }
    with pytest.raises(SpecError) as e:
        parse_cluster(raw)
    assert e.value.problems == [
        "pumps.replicas: -1 must be a non-negative integer",
        "drainers[2].name: 'Bad_Name' must be a DNS label of at most 30 characters",
        "drainers[3]: must be an object, not str",
        "drainers[3].name: '' must be a DNS label of at most 30 characters",
        "drainers: name 'a' is used twice",
    ]


def test_online_counts_online_nodes_among_the_wanted() -> None:
    nodes = [
        NodeStatus("c-pump-0", "", NodeState.ONLINE),
        NodeStatus("c-pump-1", "", NodeState.CLOSING),
        NodeStatus("c-pump-5", "", NodeState.ONLINE),
    ]
    assert online(nodes) == 2
    assert online(nodes, ["c-pump-0", "c-pump-1"]) == 1
