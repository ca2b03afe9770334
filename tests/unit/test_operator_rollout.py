"""The rolling update's order (``rollout.plan``): one pod at a time, pumps before drainers before
captures, each replaced pod back (ready, online, caught up) before the next is released."""

from __future__ import annotations

from dataclasses import replace

from binlog_operator.rollout import NodeView, PodView, SetView, Stall, plan, stalled

OLD, NEW = "rev-old", "rev-new"


def pods(name: str, revisions: list[str], ready: bool = True) -> dict[int, PodView]:
    return {
        i: PodView(f"{name}-{i}", i, rev, ready, image=f"t:{rev}")
        for i, rev in enumerate(revisions)
    }


def sts(
    name: str,
    component: str,
    revisions: list[str],
    partition: int,
    *,
    observed: bool = True,
    ready: bool = True,
) -> SetView:
    return SetView(
        name, component, len(revisions), partition, observed, NEW, pods(name, revisions, ready)
    )


def online(*names: str, lag: float = 1.0) -> dict[str, NodeView]:
    return {n: NodeView("online", lag) for n in names}


ALL_ONLINE = online("c-pump-0", "c-pump-1", "c-pump-2", "c-drainer-d-0")


def test_a_held_roll_starts_with_the_highest_pump() -> None:
    sets = [
        sts("c-pump", "pumps", [OLD, OLD, OLD], partition=3),
        sts("c-drainer-d", "drainers", [OLD], partition=1),
        sts("c-capture", "captures", [OLD, OLD], partition=2),
    ]
    p = plan(sets, ALL_ONLINE, max_lag=30)
    assert p.partitions == {"c-pump": 2}  # the drainer and captures stay held
    assert p.rolling
    assert p.message() == (
        "pumps 0/3, drainers 0/1, captures 0/2 updated; waiting for c-pump-2: being replaced"
    )


def test_the_next_pump_waits_for_the_replaced_one_to_be_back() -> None:
    nodes = ALL_ONLINE
    # c-pump-2 still the old pod (terminating or not yet deleted)
    waiting = plan([sts("c-pump", "pumps", [OLD, OLD, OLD], partition=2)], nodes, 30)
    assert waiting.partitions == {} and waiting.waiting == "c-pump-2: being replaced"
    # the new pod exists but is not ready yet
    back = sts("c-pump", "pumps", [OLD, OLD, NEW], partition=2)
    not_ready = replace(back, pods={**back.pods, 2: PodView("c-pump-2", 2, NEW, ready=False)})
    assert plan([not_ready], nodes, 30).waiting == "c-pump-2: not ready"
    # ready, but the registry still says paused (the old process's last word)
    paused = {**nodes, "c-pump-2": NodeView("paused", 0.5)}
    assert plan([back], paused, 30).waiting == "c-pump-2: paused in the registry"
    # online but its max commit ts far behind: not caught up
    behind = {**nodes, "c-pump-2": NodeView("online", 95.0)}
    assert plan([back], behind, 30).waiting == "c-pump-2: 95 s behind (at most 30 s)"
    assert plan([back], {}, 30).waiting == "c-pump-2: not in the registry"
    # online and caught up: the next one goes
    go = plan([back], nodes, 30)
    assert go.partitions == {"c-pump": 1}
    assert go.message() == "pumps 1/3 updated; waiting for c-pump-1: being replaced"


def test_drainers_go_once_every_pump_is_back_then_captures() -> None:
    pumps_done = sts("c-pump", "pumps", [NEW, NEW], partition=0)
    drainer = sts("c-drainer-d", "drainers", [OLD], partition=1)
    captures = sts("c-capture", "captures", [OLD, OLD], partition=2)
    nodes = online("c-pump-0", "c-pump-1", "c-drainer-d-0")
    assert plan([captures, drainer, pumps_done], nodes, 30).partitions == {"c-drainer-d": 0}
    # the last pump replaced but lagging: the drainer waits
    lagging = {**nodes, "c-pump-0": NodeView("online", 40)}
    p = plan([pumps_done, drainer, captures], lagging, 30)
    assert p.partitions == {} and p.waiting == "c-pump-0: 40 s behind (at most 30 s)"
    # drainer back and caught up: the captures, highest first
    drainer_done = sts("c-drainer-d", "drainers", [NEW], partition=0)
    p = plan([pumps_done, drainer_done, captures], nodes, 30)
    assert p.partitions == {"c-capture": 1}
    assert p.updated == {"pumps": (2, 2), "drainers": (1, 1), "captures": (0, 2)}


def test_drainers_roll_one_at_a_time_by_name() -> None:
    pumps = sts("c-pump", "pumps", [NEW], partition=0)
    a = sts("c-drainer-a", "drainers", [OLD], partition=1)
    b = sts("c-drainer-b", "drainers", [OLD], partition=1)
    nodes = online("c-pump-0", "c-drainer-a-0", "c-drainer-b-0")
    assert plan([b, a, pumps], nodes, 30).partitions == {"c-drainer-a": 0}
    a_replacing = sts("c-drainer-a", "drainers", [OLD], partition=0)
    p = plan([b, a_replacing, pumps], nodes, 30)
    assert p.partitions == {} and p.waiting == "c-drainer-a-0: being replaced"


def test_only_what_changed_rolls() -> None:
    """A drainer setting changed: the pumps are up to date, only the drainer is held."""
    pumps = sts("c-pump", "pumps", [NEW, NEW], partition=0)
    drainer = sts("c-drainer-d", "drainers", [OLD], partition=1)
    p = plan([pumps, drainer], online("c-pump-0", "c-pump-1", "c-drainer-d-0"), 30)
    assert p.partitions == {"c-drainer-d": 0}
    assert p.updated["pumps"] == (2, 2)


def test_nothing_is_decided_from_a_status_the_controller_has_not_updated() -> None:
    """Right after a partition or template change the update revision may be stale."""
    stale = sts("c-pump", "pumps", [NEW, NEW], partition=1, observed=False)
    drainer = sts("c-drainer-d", "drainers", [OLD], partition=1)
    p = plan([stale, drainer], ALL_ONLINE, 30)
    assert p.partitions == {}
    assert p.waiting == "c-pump: the StatefulSet controller to see its latest spec"


def test_a_steady_cluster_is_not_rolling() -> None:
    sets = [
        sts("c-pump", "pumps", [NEW, NEW], partition=0),
        sts("c-drainer-d", "drainers", [NEW], partition=0),
    ]
    p = plan(sets, None, 30)  # the registry is not read when nothing rolls
    assert p.partitions == {} and not p.rolling and p.waiting == ""
    assert p.message() == "pumps 2/2, drainers 1/1 updated"


def test_an_unhealthy_pump_holds_a_drainer_change() -> None:
    """A pump down for another reason: no drainer is replaced meanwhile, and the reason shows."""
    pumps = sts("c-pump", "pumps", [NEW, NEW], partition=0)
    sick = replace(pumps, pods={**pumps.pods, 1: PodView("c-pump-1", 1, NEW, ready=False)})
    drainer = sts("c-drainer-d", "drainers", [OLD], partition=1)
    p = plan([sick, drainer], ALL_ONLINE, 30)
    assert p.partitions == {} and p.rolling
    assert p.waiting == "c-pump-1: not ready"


def test_a_partition_above_the_replicas_comes_down_to_the_top_pod() -> None:
    """Held at 3 and scaled to 2 meanwhile: the next step releases pod 1, not pod 2."""
    p = plan([sts("c-pump", "pumps", [OLD, OLD], partition=3)], ALL_ONLINE, 30)
    assert p.partitions == {"c-pump": 1}
    empty = SetView("c-capture", "captures", 0, 2, True, NEW, {})
    assert plan([empty], None, 30).partitions == {"c-capture": 0}


def test_captures_need_only_be_ready() -> None:
    captures = sts("c-capture", "captures", [OLD, NEW], partition=1)
    assert plan([captures], {}, 30).partitions == {"c-capture": 0}


def test_a_stall_is_timed_per_pod_whatever_its_reason() -> None:
    first = stalled(None, "c-pump-1: being replaced", 10.0)
    assert first == Stall("c-pump-1", 10.0)
    # the same pod, another reason: the same stall, still timed from its start
    same = stalled(first, "c-pump-1: not ready", 700.0)
    assert same is first and same.seconds(700.0) == 690.0
    # the roll moved on to the next pod: a new stall; nothing waited for: none
    moved = stalled(same, "c-pump-0: 45 s behind (at most 30 s)", 705.0)
    assert moved == Stall("c-pump-0", 705.0)
    assert stalled(moved, "", 710.0) is None
    assert stalled(None, "c-pump: the StatefulSet controller to see its latest spec", 1.0) == Stall(
        "c-pump", 1.0
    )
