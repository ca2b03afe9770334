"""The pumps' auto pilot's pure parts: the ``autoscale`` spec, rates from counter samples, the
decisions over time (up at once, down only after the stabilization window), the bounds, and the
``Scaling`` condition's steps."""

from __future__ import annotations

import pytest

from binlog_operator.autoscale import (
    AutoscaleSpec,
    Pilot,
    Rates,
    counter_value,
    duration,
    parse_autoscale,
)
from binlog_operator.scalestep import step
from binlog_operator.spec import SpecError, parse

AUTO = AutoscaleSpec(min_replicas=1, max_replicas=3, target=25.0, stabilization=60.0)
ETCD = {"endpoints": ["http://etcd:2379"]}


def test_the_spec_parses_with_defaults_and_clamps_the_replicas() -> None:
    raw = {"etcd": ETCD, "pumps": {"replicas": 5, "autoscale": {"maxReplicas": 3,
           "targetBinlogsPerSecond": 2000, "scaleDownStabilization": "2m30s"}}}  # fmt: skip
    spec = parse(raw)
    assert spec.pumps.autoscale == AutoscaleSpec(1, 3, 2000.0, 150.0)
    assert spec.pumps.replicas == 3  # within the bounds
    assert parse({"etcd": ETCD}).pumps.autoscale is None
    default = parse({"etcd": ETCD, "pumps": {"autoscale": {"maxReplicas": 2,
                     "targetBinlogsPerSecond": 1.5}}})  # fmt: skip
    assert default.pumps.autoscale == AutoscaleSpec(1, 2, 1.5, 300.0)


def test_every_problem_of_the_spec_is_reported() -> None:
    raw = {"etcd": ETCD, "pumps": {"autoscale": {"minReplicas": 3, "maxReplicas": 2,
           "targetBinlogsPerSecond": 0, "scaleDownStabilization": "soon"}}}  # fmt: skip
    with pytest.raises(SpecError) as e:
        parse(raw)
    text = str(e.value)
    assert "maxReplicas: 2 is below minReplicas 3" in text
    assert "targetBinlogsPerSecond: 0 must be a positive number" in text
    assert "scaleDownStabilization: 'soon'" in text
    problems: list[str] = []
    parse_autoscale({"targetBinlogsPerSecond": 1}, "a", problems)
    assert problems == ["a.maxReplicas: None must be an integer of at least 1"]


def test_durations() -> None:
    assert duration(90) == 90.0 and duration("90s") == 90.0 and duration("5m") == 300.0
    assert duration("1h2m3s") == 3723.0
    assert duration("") is None and duration("-1") is None and duration(True) is None


def test_the_counter_is_read_from_the_exposition() -> None:
    text = (
        "# HELP binlog_pump_binlogs_written binlogs stored since start\n"
        "# TYPE binlog_pump_binlogs_written gauge\n"
        "binlog_pump_binlogs_written_total_x 9.0\n"
        "binlog_pump_binlogs_written 1234.0\n"
    )
    assert counter_value(text) == 1234.0
    assert counter_value("other 1\n") is None


def test_a_rate_spans_the_window_and_restarts_with_the_counter() -> None:
    rates = Rates(window=10)
    rates.add("p0", 0, 100)
    assert rates.rate("p0") is None  # one sample
    rates.add("p0", 5, 150)
    assert rates.rate("p0") == 10.0
    rates.add("p0", 10, 250)
    rates.add("p0", 15, 450)  # the sample at 5 s is the window's start, 0 s is dropped
    assert rates.rate("p0") == 30.0
    rates.add("p0", 20, 7)  # restarted: a new series
    assert rates.rate("p0") is None
    rates.add("p0", 25, 57)
    assert rates.rate("p0") == 10.0
    rates.keep(["p1"])
    assert rates.rate("p0") is None


def test_up_at_once_down_after_the_window() -> None:
    pilot = Pilot(AUTO, since=0)
    assert pilot.decide(0, 1, {"p0": None}).reason == "Measuring"
    up = pilot.decide(10, 1, {"p0": 42.0})
    assert (up.desired, up.reason) == (2, "ScaleUp")
    assert "pumps 1 -> 2: 42.0 binlogs/s per pump (42.0 in all over 1 pump(s)), target 25" in (
        up.message
    )
    steady = pilot.decide(20, 2, {"p0": 21.0, "p1": 21.0})
    assert (steady.desired, steady.reason) == (2, "Steady")
    # the workload drops at 30 s: fewer pumps would do, but not for 60 s yet
    for t in (30, 50, 80):
        held = pilot.decide(t, 2, {"p0": 3.0, "p1": 3.0})
        assert (held.desired, held.reason) == (2, "Stabilizing"), t
    assert "1 would do" in held.message and "(60 s so far)" in held.message
    down = pilot.decide(81, 2, {"p0": 3.0, "p1": 3.0})
    assert (down.desired, down.reason) == (1, "ScaleDown")
    assert down.per_pump == 3.0 and down.total == 6.0


def test_a_short_dip_takes_no_pump() -> None:
    pilot = Pilot(AUTO, since=0)
    pilot.decide(0, 2, {"p0": 21.0, "p1": 21.0})
    assert pilot.decide(50, 2, {"p0": 2.0, "p1": 2.0}).reason == "Stabilizing"
    assert pilot.decide(55, 2, {"p0": 20.0, "p1": 20.0}).reason == "Steady"
    assert pilot.decide(100, 2, {"p0": 2.0, "p1": 2.0}).reason == "Stabilizing"  # 55 in window
    assert pilot.decide(116, 2, {"p0": 2.0, "p1": 2.0}).desired == 1


def test_a_new_pilot_watches_a_whole_window_before_a_scale_down() -> None:
    pilot = Pilot(AUTO, since=100)
    assert pilot.decide(100, 3, {"p0": 0.0, "p1": 0.0, "p2": 0.0}).reason == "Stabilizing"
    assert pilot.decide(159, 3, {"p0": 0.0, "p1": 0.0, "p2": 0.0}).reason == "Stabilizing"
    down = pilot.decide(160, 3, {"p0": 0.0, "p1": 0.0, "p2": 0.0})
    assert (down.desired, down.reason) == (1, "ScaleDown")  # the largest recommendation: 1


def test_bounds_clamp_the_count() -> None:
    pilot = Pilot(AUTO, since=0)
    assert pilot.decide(0, 1, {"p0": 1000.0}).desired == 3  # at most max
    out = pilot.decide(0, 5, {})
    assert (out.desired, out.reason) == (3, "Bounds")
    assert Pilot(AutoscaleSpec(2, 4, 10.0), 0).decide(0, 1, {}).desired == 2


def test_a_rate_right_at_the_target_needs_no_more_pumps() -> None:
    assert Pilot(AUTO, since=0).decide(0, 2, {"p0": 25.0, "p1": 25.0}).reason == "Steady"


def pod(i: int) -> str:
    return f"c-pump-{i}"


def test_steps_of_the_scaling_condition() -> None:
    down = step(1, 2, 2, 2, {"c-pump-1": "closing"}, pod, scaling=False)
    assert down is not None and (down.before, down.after) == (2, 1)
    assert down.message == "pumps 2 -> 1: taking c-pump-1 offline (c-pump-1 closing)"
    up = step(2, 1, 1, 1, {}, pod, scaling=False)
    assert up is not None and up.message == "pumps 1 -> 2: applying"
    starting = step(2, 2, 2, 1, {}, pod, scaling=True)
    assert starting is not None and starting.message == "pumps 1 -> 2: 2 pods, 1 ready"
    leaving = step(1, 1, 2, 1, {}, pod, scaling=True)
    assert leaving is not None and leaving.message == "pumps 2 -> 1: 2 pods, 1 ready"
    assert step(2, 2, 2, 2, {}, pod, scaling=True) is None
    # a pod not ready outside a step (a restart, a roll) is no step
    assert step(2, 2, 2, 1, {}, pod, scaling=False) is None
