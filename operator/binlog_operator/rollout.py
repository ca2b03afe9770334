"""The order of a rolling update: which StatefulSet partition to lower next, and why not yet
(pure; no I/O).

A changed pod template is applied with its StatefulSet's ``updateStrategy.rollingUpdate.
partition`` at the replica count (``rollviews.with_rollout``), so the StatefulSet controller
replaces no pod by itself; the operator lowers the partition one ordinal at a time, and the
controller replaces the pod at that ordinal. Invariants kept by ``plan``: a partition goes down
by one only when every pod at or above it runs the update revision, is ready and, for a pump or a
drainer, is ``online`` in the registry and no more than ``max_lag`` seconds behind; the
components roll in the order pumps, drainers, captures, and a StatefulSet is not touched while
one before it is still rolling or unhealthy; nothing is decided from a StatefulSet whose status
the controller has not brought to its latest spec (its update revision would be stale).

Worked example, pumps ``c-pump`` (2 replicas) and drainer ``c-drainer-d`` (1) after an image
change, both held at partition = replicas:

    tick 1  pumps: no pod at or above 2  -> partition 1 (c-pump-1 replaced)
    tick 2  c-pump-1 terminating          -> wait ("c-pump-1: being replaced")
    tick 5  c-pump-1 new, ready, online, 3 s behind -> partition 0 (c-pump-0 replaced)
    tick 9  c-pump-0 new, ready, online   -> pumps done; drainer: partition 0
    tick 12 c-drainer-d-0 new, ready, online, caught up -> done (captures: none)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ORDER = ("pumps", "drainers", "captures")
"""The components in the order they roll."""


@dataclass(frozen=True)
class PodView:
    """One pod of a StatefulSet, as the roll needs it."""

    name: str
    ordinal: int
    revision: str  # its ``controller-revision-hash`` label
    ready: bool
    terminating: bool = False
    image: str = ""


@dataclass(frozen=True)
class NodeView:
    """A pump's or drainer's registry record: its state, and how many seconds its max commit ts
    (a drainer's checkpoint) is behind its update ts (None: no ts yet)."""

    state: str
    lag: float | None = None


@dataclass(frozen=True)
class SetView:
    """One StatefulSet of the cluster."""

    name: str
    component: str  # one of ORDER
    replicas: int
    partition: int
    observed: bool  # status.observedGeneration == metadata.generation
    update_revision: str
    pods: Mapping[int, PodView] = field(default_factory=dict)

    def updated(self) -> int:
        """Pods below the replica count that run the update revision."""
        return sum(
            1
            for p in self.pods.values()
            if p.ordinal < self.replicas and p.revision == self.update_revision
        )

    def rolling(self) -> bool:
        """A roll is held or under way: a partition above 0, or a pod of another revision."""
        if self.partition > 0 and self.replicas > 0:
            return True
        return self.observed and self.updated() < sum(
            1 for p in self.pods.values() if p.ordinal < self.replicas
        )


@dataclass(frozen=True)
class Plan:
    partitions: dict[str, int]  # StatefulSet -> the partition to set now
    updated: dict[str, tuple[int, int]]  # component -> (pods updated, replicas)
    waiting: str  # what the roll waits for ("" when nothing)
    rolling: bool  # a roll is held or under way somewhere

    def progress(self) -> str:
        """E.g. ``pumps 1/3, drainers 0/1 updated`` (components without pods left out)."""
        parts = [f"{c} {done}/{total}" for c, (done, total) in self.updated.items() if total]
        return (", ".join(parts) or "no pods") + " updated"

    def message(self) -> str:
        return f"{self.progress()}; waiting for {self.waiting}" if self.waiting else self.progress()


@dataclass(frozen=True)
class Stall:
    """What a roll has been waiting for (the pod, or the StatefulSet, before the first ``:``
    of ``Plan.waiting``) and since when (the operator's monotonic clock)."""

    pod: str
    since: float

    def seconds(self, now: float) -> float:
        return now - self.since


def stalled(previous: Stall | None, waiting: str, now: float) -> Stall | None:
    """The stall after a look that waits for ``waiting``: None when it waits for nothing, the
    same one while it waits for the same pod (whatever the pod's reason), a new one otherwise."""
    if not waiting:
        return None
    pod = waiting.partition(":")[0]
    if previous is not None and previous.pod == pod:
        return previous
    return Stall(pod, now)


def plan(sets: Iterable[SetView], nodes: Mapping[str, NodeView] | None, max_lag: float) -> Plan:
    """The partitions to lower now. ``nodes``: the registry records by node id (= pod name);
    None when the registry was not read (then a ready pod counts as healthy)."""
    ordered = sorted(sets, key=lambda s: (ORDER.index(s.component), s.name))
    partitions: dict[str, int] = {}
    updated = {c: (0, 0) for c in ORDER}
    waiting = ""
    for s in ordered:
        done, total = updated[s.component]
        updated[s.component] = (done + s.updated(), total + s.replicas)
        if waiting:
            continue  # an earlier StatefulSet is still rolling: this one is held
        new, why = step(s, nodes, max_lag)
        if new is not None:
            partitions[s.name] = new
        waiting = why
    rolling = any(s.rolling() for s in ordered)
    return Plan(partitions, updated, waiting, rolling)


def step(
    s: SetView, nodes: Mapping[str, NodeView] | None, max_lag: float
) -> tuple[int | None, str]:
    """(the partition to set, or None; what the StatefulSet waits for, "" when it is done)."""
    if not s.observed:
        return None, f"{s.name}: the StatefulSet controller to see its latest spec"
    top = min(s.partition, s.replicas)
    why = _unsettled(s, range(s.replicas - 1, top - 1, -1), nodes, max_lag)
    if why:
        return None, why
    if top > 0:
        return top - 1, f"{s.name}-{top - 1}: being replaced"
    return (0 if s.partition else None), ""


def _unsettled(
    s: SetView, ordinals: Sequence[int] | range, nodes: Mapping[str, NodeView] | None, lag: float
) -> str:
    """The first pod of ``ordinals`` not yet updated and healthy, and why ("" if none)."""
    for ordinal in ordinals:
        name = f"{s.name}-{ordinal}"
        pod = s.pods.get(ordinal)
        if pod is None:
            return f"{name}: no pod yet"
        if pod.terminating or pod.revision != s.update_revision:
            return f"{name}: being replaced"
        problem = health(s.component, pod, nodes, lag)
        if problem:
            return f"{name}: {problem}"
    return ""


def health(
    component: str, pod: PodView, nodes: Mapping[str, NodeView] | None, max_lag: float
) -> str:
    """Why an updated pod does not count as back yet ("" when it does)."""
    if not pod.ready:
        return "not ready"
    if component == "captures" or nodes is None:
        return ""
    node = nodes.get(pod.name)
    if node is None:
        return "not in the registry"
    if node.state != "online":
        return f"{node.state} in the registry"
    if node.lag is not None and node.lag > max_lag:
        return f"{node.lag:.0f} s behind (at most {max_lag:.0f} s)"
    return ""
