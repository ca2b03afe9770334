"""The in-memory ring of samples behind the page's lag charts (pure; no I/O).

Each sample is one point in time with a figure per series (``drainer/<id>``,
``changefeed/<cluster>/<ns>/<id>``, ``pump/<id>``). Invariant: the ring holds at most
``capacity`` samples, oldest first, and ``series`` returns for every series one value per
kept sample (None where the series had no figure then), so every chart shares one time axis.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    time: float  # unix seconds
    values: Mapping[str, float]


class History:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a history keeps at least one sample")
        self._samples: deque[Sample] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, sample: Sample) -> None:
        self._samples.append(sample)

    def to_dict(self) -> dict[str, object]:
        """``{"time": [...], "series": {name: [value or None, ...]}}``."""
        names = sorted({name for s in self._samples for name in s.values})
        return {
            "time": [s.time for s in self._samples],
            "series": {n: [s.values.get(n) for s in self._samples] for n in names},
        }
