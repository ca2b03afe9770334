"""Conflict detection for parallel apply: which worker a row change goes to (tidb-binlog's
loader causality, reference §4.8).

Invariant: two changes that touch a common row, or a common unique-key value, go to the same
worker, in upstream order; a change whose keys are already held by two different workers is a
conflict: the caller runs everything dispatched so far to completion, resets, then dispatches
it afresh. Changes with disjoint keys may run in any order, on any worker.

A change's keys (``keys_of``): for the new row and, for an UPDATE, the old row too, every
primary or unique key whose columns are all non-NULL, as ``schema.table/key=values``; a row
of a table with no such key gives one key, a CRC32 of all its values. Text values are
case-folded and stripped of trailing spaces, so values a case-insensitive or PAD SPACE
collation treats as equal share a key (a false conflict only costs a flush).

Worked example, 2 workers, table t(id PRIMARY KEY, u UNIQUE)::

    change                    keys                 held by        worker
    INSERT (1,a)              id=1, u=a            -              crc32("t/PRIMARY=1") % 2 = 0
    INSERT (2,b)              id=2, u=b            -              say 1
    UPDATE (1,a)->(1,c)       id=1, u=a, u=c       0              0
    UPDATE (2,b)->(2,a)       id=2, u=b, u=a       1 and 0        conflict: flush, reset; then 0
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from tributary.change import Row, RowChange, SqlValue


def _text(v: SqlValue) -> str:
    if isinstance(v, str):
        return v.casefold().rstrip(" ")
    if isinstance(v, bytes):
        return v.hex()
    return repr(v)


def _row_keys(change: RowChange, row: Row) -> list[str]:
    t = change.table
    keys: list[tuple[str, tuple[str, ...]]] = []
    if t.primary_key:
        keys.append(("PRIMARY", t.primary_key))
    keys.extend((u.name, u.columns) for u in t.unique_keys)
    found: list[str] = []
    for name, cols in keys:
        values = [row.get(c) for c in cols]
        if all(v is not None for v in values):
            found.append(f"{t.qualified}/{name}=" + ",".join(_text(v) for v in values))
    return found


def keys_of(change: RowChange) -> list[str]:
    """The causality keys of one change (never empty)."""
    keys = _row_keys(change, change.values)
    if change.old_values is not None:
        keys += [k for k in _row_keys(change, change.old_values) if k not in keys]
    if keys:
        return keys
    digest = zlib.crc32(
        "\x00".join(f"{c}={_text(v)}" for c, v in sorted(change.values.items())).encode()
    )
    return [f"{change.table.qualified}/*={digest}"]


class Causality:
    """Key -> worker map of the changes dispatched since the last reset."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError("causality needs at least one worker")
        self._workers = workers
        self._held: dict[str, int] = {}

    def assign(self, keys: Sequence[str]) -> int | None:
        """The worker for a change with ``keys``, remembering them; None on a conflict (keys held
        by two workers): the caller must flush, ``reset`` and assign again."""
        holders = {self._held[k] for k in keys if k in self._held}
        if len(holders) > 1:
            return None
        worker = holders.pop() if holders else zlib.crc32(keys[0].encode()) % self._workers
        for k in keys:
            self._held[k] = worker
        return worker

    def reset(self) -> None:
        self._held.clear()

    def __len__(self) -> int:
        return len(self._held)
