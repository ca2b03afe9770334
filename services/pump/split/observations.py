"""What a front process's RPCs observe, shipped to the storage writer's ``/metrics``.

A front has no metrics endpoint (the port's HTTP API is the writer's), so the durations its
write RPCs observe (``binlog_pump_rpc_duration_seconds{method, label}``) are kept here as
plain per-bucket counts, and every ``SHIP_INTERVAL`` what was gathered since the last
shipment goes to the writer in one ``OBSERVED`` frame over the front link (``split.frames``).
The writer adds it to its own histogram (``PumpMetrics.merge_rpc``): one family, with the
names, labels and buckets of a single-process pump, counting the calls of every front.

Worked example (buckets 50 us x 2^n): WriteBinlog succeeds in 1 ms, 1 ms and 3 ms within a
second; the next frame carries ``WriteBinlog/succ`` with 2 in the bucket ``le=0.0016``, 1 in
``le=0.0032``, sum 0.005; the writer's ``_count`` grows by 3 and the front starts again from
zero.

Invariant: an observation is shipped at most once (``take`` hands the counts over and starts
afresh); a front that stops cleanly ships the rest before its link closes, so the writer's
counts end equal to the calls the fronts answered. A SIGKILLed front loses at most its last
interval's observations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from services.pump.metrics import Observed
from tributary.telemetry import PlainBuckets

SHIP_INTERVAL = 1.0  # seconds between two shipments of a front's observations


class FrontObservations:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self._children: dict[tuple[str, str], PlainBuckets] = {}

    def observe(self, method: str, label: str, seconds: float) -> None:
        child = self._children.get((method, label))
        if child is None:
            child = self._children[method, label] = PlainBuckets(self._bounds)
        child.observe(seconds)

    def take(self) -> list[Observed]:
        """What was observed since the last ``take``."""
        children, self._children = self._children, {}
        return [Observed(m, lb, tuple(c.counts), c.sum) for (m, lb), c in children.items()]


async def ship_every(
    interval: float, observations: FrontObservations, send: Callable[[Sequence[Observed]], None]
) -> None:
    """Send what ``observations`` gathered every ``interval`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval)
        send(observations.take())
