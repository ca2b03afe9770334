"""The cyclic garbage collector's settings for the data-path processes.

The drainer and the pump make and drop many short-lived objects per binlog or row (headers,
tuples, futures, rows) and almost no reference cycles. With CPython's default thresholds
(700, 10, 10) the youngest generation is collected every few hundred binlogs and the oldest
one, which holds everything loaded at start-up and every queued binlog, often enough to take a
tenth of the drainer's CPU. The objects alive at start-up (modules, settings) are frozen out of
collection; reference cycles are still collected, less often.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 100)


def relax_gc() -> None:
    """Freeze what is alive now and raise the collection thresholds (call once, at start-up)."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
