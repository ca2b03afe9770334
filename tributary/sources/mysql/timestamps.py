"""Commit timestamps (TSO layout, ``wire.ts``) for upstream transactions, from binlog time.

Rule: the transaction's commit ts is ``compose(event_seconds * 1000, 0)`` when that is greater
than the previous transaction's ts, else the previous ts + 1. ``event_seconds`` is the binlog
timestamp of the event that ends the transaction (XID, COMMIT or the DDL's QUERY).

Because the rule depends only on the event time and the previous ts, a reader resumed from a
checkpoint ``(position, ts)`` assigns the transactions after ``position`` exactly the ts it
assigned them before; sinks then drop what they already applied (``sinks.pending``).

Worked example (ts = physical_ms << 18 | logical): three transactions ending at second 100
and one at second 101, starting from previous ts 0:

    t1 @100 s: compose(100000, 0) = 26214400000        > 0            -> 26214400000
    t2 @100 s: 26214400000 is not > 26214400000                       -> 26214400001
    t3 @100 s:                                                        -> 26214400002
    t4 @101 s: compose(101000, 0) = 26476544000        > 26214400002  -> 26476544000

A clock step backwards upstream (t5 @99 s) gives 26476544001: the ts never goes back. Each
transaction's start ts is its commit ts - 1, so start ts are distinct and below commit ts.
"""

from __future__ import annotations

from tributary.wire.ts import compose


def next_ts(event_seconds: int, previous: int) -> int:
    ts = compose(event_seconds * 1000, 0)
    return ts if ts > previous else previous + 1
