"""Batches a processor handed to a pipelined sink, waiting for the sink's checkpoint.

A pipelined sink (``tributary.sinks.Pipelined``, the storage sink) takes a batch and makes it
durable later (its next flush). The processor's spans may move past a batch only once the
sink's checkpoint is at its last transaction, so each submitted batch waits here, in order,
with what the spans advance to when it is released. A batch of resolved markers only (nothing
for the sink) waits behind the batches before it and needs nothing of its own.

Example: batches ending at 100 (rows), 110 (rows) and 120 (a marker) are waiting; the sink's
checkpoint reaches 105: nothing is released (100 needs 100 <= 105: released; 110 does not);
at 110 the 110 batch and the marker behind it are released, and the spans move to 120.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Submitted:
    need: int | None  # the commit ts the sink's checkpoint must reach; None: nothing to write
    commit_ts: int  # the spans move here (the batch's last item, a marker's ts included)
    position: str  # the source position after that item
    txns: int  # transactions handed to the sink
    rows: int
    synced: int | None  # commit ts of the last transaction that changed the downstream


class Acks:
    def __init__(self) -> None:
        self._waiting: deque[Submitted] = deque()

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def add(self, batch: Submitted) -> None:
        self._waiting.append(batch)

    def release(self, checkpoint: int | None) -> list[Submitted]:
        """The batches, oldest first, that ``checkpoint`` (the sink's) covers."""
        out: list[Submitted] = []
        while self._waiting:
            need = self._waiting[0].need
            if need is not None and (checkpoint is None or need > checkpoint):
                break
            out.append(self._waiting.popleft())
        return out
