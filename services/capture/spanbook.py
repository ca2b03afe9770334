"""What one processor keeps per span it runs: each span's checkpoint, and which rows are whose.

A processor runs a set of spans of one changefeed with one binlog reader: it starts at the
span with the lowest checkpoint (its position, ``last_ts`` = its checkpoint) and each span
takes only what comes after its own checkpoint, so a span that joined behind the others is
caught up while the others drop what they already have.

* a row belongs to its table's span when the changefeed schedules that table, else to
  ``#ddl`` (tables created or renamed after the changefeed was); everything belongs to ``*``;
* ``keep`` leaves in a transaction the rows of the spans held here whose checkpoint is below
  its commit ts, and a DDL only to ``#ddl`` or ``*`` below it (an empty result is a
  checkpoint-only marker);
* ``advance`` moves every span held here that is below the ts to (ts, position after it);
* ``hold`` is the DDL barrier (``processor``): spans below ``ts - 1`` move to ``ts - 1`` with
  the position before the DDL. That pair is a valid resume point: the source gives the next
  transaction ``ts`` again (``sources.mysql.timestamps``: the DDL's ts is its second's ts when
  that exceeds the previous ts, else previous + 1, and either way ``ts - 1`` gives ``ts``).

Example: spans a (checkpoint 100 @ p100) and b (300 @ p300). The reader opens at p100 with
last ts 100. A transaction at 200 with rows of a and b keeps a's rows only; ``advance(200)``
moves a to 200, b stays at 300. At 400 both take their rows, and both move to 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tributary.cdc.spans import DDL_SPAN, WHOLE_SPAN, table_span
from tributary.change import Txn


@dataclass(frozen=True, slots=True)
class SpanMark:
    checkpoint_ts: int
    position: str


class SpanBook:
    def __init__(self, spans: Mapping[str, SpanMark], tables: frozenset[str]) -> None:
        if not spans:
            raise ValueError("a processor runs at least one span")
        self.marks: dict[str, SpanMark] = dict(spans)
        self.whole = WHOLE_SPAN in spans
        self.tables = tables  # the changefeed's table spans (not only those held here)

    @property
    def has_ddl(self) -> bool:
        return self.whole or DDL_SPAN in self.marks

    def low(self) -> SpanMark:
        """The mark of the span furthest behind: where the reader starts, the checkpoint shown."""
        return min(self.marks.values(), key=lambda m: m.checkpoint_ts)

    def span_of(self, schema: str, table: str) -> str:
        if self.whole:
            return WHOLE_SPAN
        name = table_span(schema, table)
        return name if name in self.tables else DDL_SPAN

    def behind(self, ts: int) -> bool:
        return any(m.checkpoint_ts < ts for m in self.marks.values())

    def keep(self, txn: Txn) -> Txn:
        ts = txn.commit_ts
        if txn.ddl is not None:
            ddl = self.marks.get(WHOLE_SPAN if self.whole else DDL_SPAN)
            if ddl is not None and ddl.checkpoint_ts < ts:
                return txn
            return Txn(ts, txn.start_ts, schema_version=txn.schema_version)
        if not txn.rows:
            return txn
        kept = tuple(
            r
            for r in txn.rows
            if (m := self.marks.get(self.span_of(r.table.schema, r.table.table))) is not None
            and m.checkpoint_ts < ts
        )
        if len(kept) == len(txn.rows):
            return txn
        return Txn(ts, txn.start_ts, kept, schema_version=txn.schema_version)

    def advance(self, ts: int, position: str) -> None:
        for span, m in self.marks.items():
            if m.checkpoint_ts < ts:
                self.marks[span] = SpanMark(ts, position)

    def hold(self, ts: int, position: str) -> None:
        self.advance(ts - 1, position)

    def others_reached(self, observed: Mapping[str, int], ts: int) -> bool:
        """Whether every span of the changefeed not held here has its checkpoint at ``ts``."""
        return all(c >= ts for s, c in observed.items() if s not in self.marks)
