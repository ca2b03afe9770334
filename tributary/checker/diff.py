"""Row-level differences between the two sides' canonical rows of one chunk.

Keyed tables: rows are grouped by key. A key on one side only is MISSING (upstream only) or
EXTRA (downstream only); a key on both with other values is DIFFERENT, naming the columns
that differ. A downstream without the upstream's key constraint may hold a key twice: rows
of one key are first matched by equal values, then paired, and the rest are missing/extra.
Keyless tables: rows are compared as multisets, so a row held twice upstream and once
downstream is MISSING with count 1.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

from tributary.checker.canon import Canon, Row, sort_key
from tributary.checker.report import DiffKind, RowDiff


def diff_rows(
    columns: Sequence[str], key_index: Sequence[int], up: Sequence[Row], down: Sequence[Row]
) -> Iterator[RowDiff]:
    """The differences of one chunk, in key order."""
    if not key_index:
        yield from _diff_multiset(columns, up, down)
        return
    groups: dict[tuple[Canon, ...], tuple[list[Row], list[Row]]] = defaultdict(lambda: ([], []))
    for side, rows in ((0, up), (1, down)):
        for r in rows:
            groups[tuple(r[i] for i in key_index)][side].append(r)
    key_names = [columns[i] for i in key_index]
    for key in sorted(groups, key=sort_key):
        ups, downs = groups[key]
        if ups == downs:
            continue
        named = tuple(zip(key_names, key, strict=True))
        yield from _diff_key(columns, named, ups, downs)


def _diff_key(
    columns: Sequence[str],
    key: tuple[tuple[str, Canon], ...],
    ups: list[Row],
    downs: list[Row],
) -> Iterator[RowDiff]:
    only_up = list(_surplus(ups, downs))
    only_down = list(_surplus(downs, ups))
    for u, d in zip(only_up, only_down, strict=False):
        cols = tuple(i for i, (a, b) in enumerate(zip(u, d, strict=True)) if a != b)
        yield RowDiff(
            DiffKind.DIFFERENT,
            key,
            tuple(columns[i] for i in cols),
            tuple(u[i] for i in cols),
            tuple(d[i] for i in cols),
        )
    paired = min(len(only_up), len(only_down))
    for _ in only_up[paired:]:
        yield RowDiff(DiffKind.MISSING, key)
    for _ in only_down[paired:]:
        yield RowDiff(DiffKind.EXTRA, key)


def _surplus(rows: list[Row], others: list[Row]) -> Iterator[Row]:
    """The rows of ``rows`` left after removing one equal row of ``others`` for each."""
    spare = Counter(others)
    for r in rows:
        if spare[r] > 0:
            spare[r] -= 1
        else:
            yield r


def _diff_multiset(
    columns: Sequence[str], up: Sequence[Row], down: Sequence[Row]
) -> Iterator[RowDiff]:
    counts = Counter(up)
    counts.subtract(Counter(down))
    for row in sorted(counts, key=sort_key):
        n = counts[row]
        if n:
            kind = DiffKind.MISSING if n > 0 else DiffKind.EXTRA
            yield RowDiff(kind, tuple(zip(columns, row, strict=True)), count=abs(n))
