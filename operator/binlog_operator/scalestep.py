"""Whether a BinlogCluster's pumps are being scaled, and how far it got: the ``Scaling``
condition's message (pure).

A step begins when the pump count asked for (``spec.pumps.replicas``, within the autoscale
bounds) differs from the StatefulSet's replicas (a scale-down has not taken its pumps offline
yet), or the StatefulSet's pods are not that many yet; once begun it lasts until the StatefulSet
runs that many pods, all ready. Invariant: a pod that is merely not ready outside a step (a
restart, a rolling update) never starts one.

Example: asked 1, StatefulSet 2, pods 2, demo-pump-1 ``closing`` in the registry gives
``pumps 2 -> 1: taking demo-pump-1 offline (demo-pump-1 closing)``; then StatefulSet 1 with the
pod still terminating: ``pumps 2 -> 1: 2 pods, 1 ready``; then 1 pod, ready: settled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """A step under way: from ``before`` pumps to ``after``, and where it is."""

    before: int
    after: int
    message: str


def step(
    asked: int,
    applied: int,
    pods: int,
    ready: int,
    states: Mapping[str, str],
    pod: Callable[[int], str],
    scaling: bool,
) -> Step | None:
    """The step under way (None: settled). ``asked``: the spec's count; ``applied``: the
    StatefulSet's replicas; ``pods``/``ready``: its pods, and the ready ones; ``states``: pump
    node id -> registry state; ``scaling``: whether a step was under way at the last look."""
    if asked < applied:
        leaving = [pod(i) for i in range(applied - 1, asked - 1, -1)]
        detail = ", ".join(f"{p} {states.get(p, 'unregistered')}" for p in leaving)
        return Step(
            applied, asked, f"pumps {applied} -> {asked}: taking {', '.join(leaving)} offline "
            f"({detail})"
        )  # fmt: skip
    if asked > applied:
        return Step(applied, asked, f"pumps {applied} -> {asked}: applying")
    if pods != applied or (scaling and ready < applied):
        before = pods if pods != applied else ready  # pods there, not ready yet: growing
        return Step(before, applied, f"pumps {before} -> {applied}: {pods} pods, {ready} ready")
    return None
