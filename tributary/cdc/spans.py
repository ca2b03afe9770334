"""A changefeed's spans, the unit the owner schedules over captures, and their records.

A span is one upstream table (``schema.table``), ``#ddl`` or ``*``:

* a *spread* changefeed has one span per table it replicated when it was created, plus
  ``#ddl``: every DDL, and the rows of any table that is not a span of its own (one created
  later, or renamed to a new name);
* a *whole* changefeed (a sink that takes one writer only, or a record written before spans
  existed) has the single span ``*``: everything, on one capture, as before.

Two records per span, each written by one side, so the owner and the processors never race
on a key (TiCDC's owner keeps the same split between its ReplicationSet and the agents' table
status):

* ``TableAssign`` (the owner's): which capture holds the span and whether it must let it go
  (``stopping``: drained, rebalanced);
* ``TableProgress`` (the processor's): the span's checkpoint ts, the source position right
  after it, and which capture runs it now (``""``: nobody; the span was released).

Invariant (the move protocol): a span runs on at most one capture at a time. The owner
assigns a span to a new capture only once its progress says nobody runs it (released), or the
holder is gone from the cluster (its session expired); a capture claims a span (writes its
id into the progress, guarded by the assignment) before it starts it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tributary.cdc.errors import BadRecord
from tributary.cdc.model import _dump, _load

DDL_SPAN = "#ddl"
WHOLE_SPAN = "*"


def table_span(schema: str, table: str) -> str:
    return f"{schema}.{table}"


class SpanState(enum.StrEnum):
    REPLICATING = "replicating"
    STOPPING = "stopping"


@dataclass(frozen=True, slots=True)
class TableAssign:
    capture: str
    state: SpanState = SpanState.REPLICATING

    def to_json(self) -> bytes:
        return _dump({"capture-id": self.capture, "state": self.state.value})

    @classmethod
    def from_json(cls, raw: bytes | str) -> TableAssign:
        d = _load(raw, "table assignment")
        try:
            return cls(str(d.get("capture-id", "")), SpanState(d.get("state") or "replicating"))
        except ValueError as e:
            raise BadRecord(f"table assignment has a bad field: {e}") from e


@dataclass(frozen=True, slots=True)
class TableProgress:
    checkpoint_ts: int
    source_position: str
    capture: str = ""  # the capture running the span; "" once released

    def to_json(self) -> bytes:
        return _dump(
            {
                "checkpoint-ts": self.checkpoint_ts,
                "source-position": self.source_position,
                "capture-id": self.capture,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> TableProgress:
        d = _load(raw, "table progress")
        try:
            return cls(
                int(d.get("checkpoint-ts", 0)),
                str(d.get("source-position", "")),
                str(d.get("capture-id", "")),
            )
        except (TypeError, ValueError) as e:
            raise BadRecord(f"table progress has a bad field: {e}") from e
