"""An UPDATE that changes a key is written as a DELETE and an INSERT (TiCDC's split).

TiCDC splits, for every sink but MySQL, an UPDATE whose primary key or unique key columns
changed into a DELETE of the old row and an INSERT of the new one (``ShouldSplitUpdateEvent``,
since v6.5.3): a CSV record carries the new row only, and its reader could not remove the old
key otherwise. Example: ``UPDATE t SET id = 2 WHERE id = 1`` is ``D ... 1 ...`` then
``I ... 2 ...``; ``UPDATE t SET v = 5 WHERE id = 1`` stays ``U``.

TiCDC then sorts a transaction's rows of the table deletes first; its rows are one per key and
transaction, so the order does not matter there. A binlog gives one row per statement, and the
same key can change twice in a transaction (insert, then update), so here the rows keep the
binlog's order, the DELETE and INSERT where the UPDATE was: applied one after the other they
always leave what the upstream has.
"""

from __future__ import annotations

from collections.abc import Iterable

from tributary.change import RowChange, RowKind


def key_changed(change: RowChange) -> bool:
    """Whether an UPDATE changes a primary or unique key column."""
    if change.kind is not RowKind.UPDATE or change.old_values is None:
        return False
    t, old, new = change.table, change.old_values, change.values
    keyed = set(t.primary_key).union(*(u.columns for u in t.unique_keys))
    return any(c in old and c in new and old[c] != new[c] for c in keyed)


def split_updates(rows: Iterable[RowChange]) -> list[RowChange]:
    out: list[RowChange] = []
    for r in rows:
        if key_changed(r):
            assert r.old_values is not None
            out += (RowChange.delete(r.table, r.old_values), RowChange.insert(r.table, r.values))
        else:
            out.append(r)
    return out
