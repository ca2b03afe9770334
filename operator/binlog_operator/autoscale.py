"""The pumps' auto pilot (pure): each pump's write rate from samples of its binlog counter, and
the replica count it asks for (``spec.pumps.autoscale``).

Invariants: the count asked for stays within ``[minReplicas, maxReplicas]``; it goes up as soon
as the measured rate asks for more pumps, and down only when every recommendation of the last
``scaleDownStabilization`` seconds asked for fewer pumps than there are (and the pilot has
watched that long), so a short dip never takes a pump away; while a pump has no rate yet (it
just started, or its metrics are unreachable) nothing is decided.

Worked example: target 25 binlogs/s per pump, min 1, max 3, stabilization 60 s, 1 pump.
A workload starts: the pump's counter goes 100 -> 520 in 10 s, 42 binlogs/s in all, so
``ceil(42 / 25) = 2``: scale up to 2 at once. Both pumps then write 21/s each (42 in all):
still 2. The workload drops to 6/s in all: ``ceil(6 / 25) = 1``, fewer than 2, but the
recommendations of the last 60 s still hold a 2, so the pilot holds; 60 s after the drop every
recommendation in the window is 1, and it scales down to 1 (the largest of them).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_DURATION = re.compile(r"^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$")
DEFAULT_STABILIZATION = 300.0  # seconds, as a HorizontalPodAutoscaler's scale-down default
WRITTEN = "binlog_pump_binlogs_written"  # the pump's counter of binlogs stored since it started


@dataclass(frozen=True)
class AutoscaleSpec:
    """``spec.pumps.autoscale``: pumps between ``min_replicas`` and ``max_replicas``, each
    writing about ``target`` binlogs a second; a scale-down waits ``stabilization`` seconds."""

    min_replicas: int
    max_replicas: int
    target: float
    stabilization: float = DEFAULT_STABILIZATION

    def clamp(self, replicas: int) -> int:
        return max(self.min_replicas, min(self.max_replicas, replicas))


def parse_autoscale(raw: object, where: str, problems: list[str]) -> AutoscaleSpec | None:
    """The validated ``autoscale`` object (None when not given); problems appended."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, not {type(raw).__name__}")
        return None
    low = _int(raw.get("minReplicas", 1), f"{where}.minReplicas", problems)
    high = _int(raw.get("maxReplicas"), f"{where}.maxReplicas", problems)
    if low and high and high < low:
        problems.append(f"{where}.maxReplicas: {high} is below minReplicas {low}")
    target = raw.get("targetBinlogsPerSecond")
    if isinstance(target, bool) or not isinstance(target, int | float) or target <= 0:
        problems.append(f"{where}.targetBinlogsPerSecond: {target!r} must be a positive number")
        target = 1.0
    window = duration(raw.get("scaleDownStabilization", "5m"))
    if window is None:
        problems.append(
            f"{where}.scaleDownStabilization: {raw.get('scaleDownStabilization')!r} must be "
            "seconds or a duration such as 90s, 5m, 1h"
        )
        window = DEFAULT_STABILIZATION
    return AutoscaleSpec(low or 1, high or 1, float(target), window)


def duration(raw: object) -> float | None:
    """Seconds from an integer or a duration of hours, minutes and seconds (``1m30s``)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return float(raw)
    m = _DURATION.match(raw) if isinstance(raw, str) and raw else None
    if m is None:
        return None
    h, mins, s = (int(g or 0) for g in m.groups())
    return float(h * 3600 + mins * 60 + s)


def _int(raw: object, where: str, problems: list[str]) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        problems.append(f"{where}: {raw!r} must be an integer of at least 1")
        return 0
    return raw


def counter_value(text: str, name: str = WRITTEN) -> float | None:
    """The value of the unlabelled sample ``name`` in a Prometheus text exposition."""
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if head == name and rest:
            try:
                return float(rest.split()[0])
            except ValueError:
                return None
    return None


class Rates:
    """Each pod's counter samples; its rate over (about) the last ``window`` seconds.

    A counter that went down (the pump restarted) starts the pod's samples again."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._samples: dict[str, deque[tuple[float, float]]] = {}

    def add(self, pod: str, now: float, value: float) -> None:
        samples = self._samples.setdefault(pod, deque())
        if samples and value < samples[-1][1]:
            samples.clear()
        samples.append((now, value))
        # keep one sample at or before the window's start, so the rate spans the whole window
        while len(samples) > 2 and samples[1][0] <= now - self.window:
            samples.popleft()

    def rate(self, pod: str) -> float | None:
        """Binlogs a second between the pod's oldest kept sample and its newest; None until it
        has two."""
        samples = self._samples.get(pod)
        if not samples or len(samples) < 2:
            return None
        (t0, v0), (t1, v1) = samples[0], samples[-1]
        return (v1 - v0) / (t1 - t0) if t1 > t0 else None

    def keep(self, pods: Iterable[str]) -> None:
        """Forget pods not among ``pods`` (scaled away)."""
        wanted = set(pods)
        for pod in [p for p in self._samples if p not in wanted]:
            del self._samples[pod]


@dataclass(frozen=True)
class Decision:
    """What the pilot asks for: ``desired`` replicas (== current: hold), why, and the figures."""

    desired: int
    reason: str  # ScaleUp, ScaleDown, Bounds, Stabilizing, Steady, Measuring
    message: str
    total: float | None = None  # binlogs/s, all pumps
    per_pump: float | None = None

    def figures(self) -> dict[str, Any]:
        """``status.autoscale`` (rates rounded to 0.1 binlogs/s)."""
        out: dict[str, Any] = {"desiredReplicas": self.desired, "reason": self.reason}
        if self.total is not None and self.per_pump is not None:
            out["binlogsPerSecond"] = str(round(self.total, 1))
            out["binlogsPerSecondPerPump"] = str(round(self.per_pump, 1))
        return out


class Pilot:
    """Recommendations over time for one cluster's pumps (one ``AutoscaleSpec``)."""

    def __init__(self, spec: AutoscaleSpec, since: float) -> None:
        self.spec = spec
        self._since = since  # when this pilot began watching
        self._history: deque[tuple[float, int]] = deque()

    def decide(self, now: float, current: int, rates: Mapping[str, float | None]) -> Decision:
        """The count for ``current`` pumps whose rates are ``rates`` (pod -> binlogs/s)."""
        spec = self.spec
        if spec.clamp(current) != current:
            bound = spec.clamp(current)
            return Decision(
                bound, "Bounds", f"{current} pumps are outside {spec.min_replicas}.."
                f"{spec.max_replicas}: {bound}"
            )  # fmt: skip
        missing = sorted(p for p, r in rates.items() if r is None)
        if missing or not rates:
            return Decision(
                current, "Measuring", f"no write rate yet for {', '.join(missing) or 'any pump'}"
            )
        total = sum(r for r in rates.values() if r is not None)
        per_pump = total / len(rates)
        wanted = spec.clamp(math.ceil(total / spec.target - 1e-9))
        self._history.append((now, wanted))
        while self._history and self._history[0][0] < now - spec.stabilization:
            self._history.popleft()
        measured = (
            f"{per_pump:.1f} binlogs/s per pump ({total:.1f} in all over {len(rates)} "
            f"pump(s)), target {spec.target:g}"
        )
        if wanted > current:
            return Decision(
                wanted, "ScaleUp", f"pumps {current} -> {wanted}: {measured}", total, per_pump
            )
        if wanted == current:
            return Decision(current, "Steady", f"{current} pumps: {measured}", total, per_pump)
        stable = max(w for _, w in self._history)
        watched = now - self._since
        if stable < current and watched >= spec.stabilization:
            return Decision(
                stable,
                "ScaleDown",
                f"pumps {current} -> {stable}: {measured}, below what {current} pumps need for "
                f"the last {spec.stabilization:g} s",
                total,
                per_pump,
            )
        low_for = now - max((t for t, w in self._history if w >= current), default=self._since)
        return Decision(
            current,
            "Stabilizing",
            f"{current} pumps: {measured}; {wanted} would do, scaling down once that holds for "
            f"{spec.stabilization:g} s ({low_for:.0f} s so far)",
            total,
            per_pump,
        )
