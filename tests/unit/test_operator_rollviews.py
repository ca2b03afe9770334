"""A StatefulSet's side of a rolling update: the template hash, the partition it is applied
with, the views the roll reads from live objects, and the versions the status shows."""

from __future__ import annotations

import copy
from typing import Any

from binlog_operator.manifests import build
from binlog_operator.rollviews import (
    TEMPLATE_HASH,
    partition_of,
    set_view,
    template_hash,
    version_of,
    versions,
    with_rollout,
)
from binlog_operator.spec import parse

RAW: dict[str, Any] = {
    "etcd": {"endpoints": ["http://etcd-0:2379"]},
    "image": "tributary:0.1.0",
    "pumps": {"replicas": 3, "config": {"gc": 3}},
    "drainers": [{"name": "down", "sinkURI": "mysql://root@db:3306/"}],
    "captures": {"replicas": 2, "upstreamSecret": {"name": "up"}},
}


def sets(raw: dict[str, Any] = RAW) -> dict[str, dict[str, Any]]:
    built = build("c", "ns", "uid", parse(raw), raw["pumps"]["replicas"])
    return {o["metadata"]["name"]: o for o in built if o["kind"] == "StatefulSet"}


def hashes(raw: dict[str, Any]) -> dict[str, str]:
    return {name: template_hash(s) for name, s in sets(raw).items()}


def test_a_setting_changes_the_template_hash_of_its_component_only() -> None:
    before = hashes(RAW)
    pump_edit = {**RAW, "pumps": {**RAW["pumps"], "config": {"gc": 5}}}
    assert {n for n, h in hashes(pump_edit).items() if h != before[n]} == {"c-pump"}
    drainer_edit = {**RAW, "drainers": [{**RAW["drainers"][0], "config": {"txn-batch": 50}}]}
    assert {n for n, h in hashes(drainer_edit).items() if h != before[n]} == {"c-drainer-down"}
    scaled = {**RAW, "pumps": {**RAW["pumps"], "replicas": 5}}
    assert hashes(scaled) == before  # the replica count is no template change


def test_an_image_change_changes_every_template_hash() -> None:
    before = hashes(RAW)
    after = hashes({**RAW, "image": "tributary:0.1.0-next"})
    assert all(after[n] != before[n] for n in before)


def live_of(sts: dict[str, Any], partition: int) -> dict[str, Any]:
    """``sts`` as the API server returns it once applied with ``partition``."""
    live = with_rollout(copy.deepcopy(sts), None)
    live["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = partition
    return live


def test_a_changed_template_is_held_an_unchanged_one_keeps_the_roll_where_it_is() -> None:
    pump = sets()["c-pump"]
    new = with_rollout(copy.deepcopy(pump), None)
    assert partition_of(new) == 0  # a new StatefulSet: no pod to protect
    assert new["metadata"]["annotations"][TEMPLATE_HASH] == template_hash(pump)
    assert new["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    mid_roll = live_of(pump, 1)
    assert partition_of(with_rollout(copy.deepcopy(pump), mid_roll)) == 1
    edited = sets({**RAW, "image": "tributary:0.1.0-next"})["c-pump"]
    assert partition_of(with_rollout(edited, mid_roll)) == 3  # every pod held again
    unannotated = copy.deepcopy(mid_roll)
    del unannotated["metadata"]["annotations"][TEMPLATE_HASH]  # made by an older operator
    assert partition_of(with_rollout(copy.deepcopy(pump), unannotated)) == 3


def pod(name: str, revision: str, *, ready: bool = True, **md: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"controller-revision-hash": revision}, **md},
        "spec": {"containers": [{"image": f"docker.io/library/tributary:{revision}"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_the_view_of_a_live_stateful_set_and_its_pods() -> None:
    live = live_of(sets()["c-pump"], 2)
    live["metadata"]["generation"] = 4
    live["status"] = {"observedGeneration": 4, "updateRevision": "b"}
    view = set_view(
        live,
        [
            pod("c-pump-0", "a"),
            pod("c-pump-2", "b", ready=False),
            pod("c-pump-1", "a", deletionTimestamp="2024-01-01T00:00:00Z"),
            pod("c-pumpkin-0", "b"),  # another StatefulSet's
        ],
    )
    assert (view.component, view.replicas, view.partition, view.observed) == ("pumps", 3, 2, True)
    assert sorted(view.pods) == [0, 1, 2]
    assert view.pods[1].terminating and not view.pods[2].ready
    assert view.updated() == 1 and view.rolling()
    live["status"]["observedGeneration"] = 3
    assert not set_view(live, []).observed


def test_versions_per_component() -> None:
    assert version_of("docker.io/library/tributary:0.1.0-next") == "0.1.0-next"
    assert version_of("registry:5000/tributary") == "latest"
    assert version_of("tributary@sha256:0123456789abcdef0123") == "0123456789ab"
    live = sets()
    pump = set_view(live["c-pump"], [pod("c-pump-0", "0.1.0"), pod("c-pump-1", "0.1.0-next")])
    drainer = set_view(live["c-drainer-down"], [pod("c-drainer-down-0", "0.1.0-next")])
    assert versions([pump, drainer]) == {
        "pumps": "0.1.0,0.1.0-next",
        "drainers": "0.1.0-next",
        "captures": None,
    }
