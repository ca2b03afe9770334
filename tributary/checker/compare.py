"""``compare``: open both sides, pair their tables, compare each pair, return the ``Report``.

Scope: a database named in a MySQL URL limits that side to it. Named on both sides, upstream
database A is compared with downstream database B (``mysql://.../A`` vs ``mysql://.../B``);
named on one side only, that database is compared on both sides. Tables pair by name (on an
SQLite side ``db.t`` is the table ``db__t``); a table on one side only is reported as such.
Then the include/exclude patterns apply to the upstream names.

The sides are read at rest: a comparison of a live replica also reports rows the downstream
has not applied yet (replication lag), which a later comparison no longer shows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from tributary.checker.errors import UsageError
from tributary.checker.filter import TableFilter
from tributary.checker.model import TableName
from tributary.checker.pairing import plan
from tributary.checker.report import Presence, Report, TableReport
from tributary.checker.source import Source
from tributary.checker.sources import open_source
from tributary.checker.table import Share, TableCheck
from tributary.telemetry.progress import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Scope:
    up: str | None  # the upstream schema compared (None: all)
    down: str | None

    @classmethod
    def of(cls, up: Source, down: Source) -> Scope:
        u, d = up.database, down.database
        return cls(u or d, d or u)

    def to_down(self, name: TableName) -> TableName:
        if self.up is not None and self.down is not None and name.schema == self.up:
            return TableName(self.down, name.table)
        return name

    def to_up(self, name: TableName) -> TableName:
        if self.up is not None and self.down is not None and name.schema == self.down:
            return TableName(self.up, name.table)
        return name


async def compare(
    upstream_url: str,
    downstream_url: str,
    *,
    tables: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    chunk_size: int = 1000,
    max_diffs: int = 100,
    progress: Progress | None = None,
) -> Report:
    """Compare every table of the upstream with the downstream.

    ``tables``/``exclude``: patterns (``db.table``, ``db.*``, ``~regex``); ``chunk_size``: rows
    per checksummed chunk; ``max_diffs``: row differences listed per table (all are counted);
    ``progress``: counts tables, chunks and upstream rows compared, the done fraction estimated
    from the tables (each an equal share) and the chunks within the current one.
    Raises UsageError for bad arguments, SourceError when a database fails.
    """
    if chunk_size < 1:
        raise UsageError(f"chunk size must be at least 1, not {chunk_size}")
    if max_diffs < 0:
        raise UsageError(f"max diffs must not be negative, not {max_diffs}")
    wanted = TableFilter.of(tables, exclude)
    async with AsyncExitStack() as stack:
        up = await stack.enter_async_context(open_source(upstream_url))
        down = await stack.enter_async_context(open_source(downstream_url))
        report = Report(up.display_url(), down.display_url())
        pairs = [p for p in await _pairs(up, down, Scope.of(up, down)) if wanted(p.name)]
        if progress is not None:
            progress.count("tables", 0, total=len(pairs))
        for i, pair in enumerate(pairs):
            share = Share(progress, i / len(pairs), 1 / len(pairs))
            report.tables.append(await _table(up, down, pair, chunk_size, max_diffs, share))
            if progress is not None:
                progress.count("tables")
                progress.estimate((i + 1) / len(pairs))
    return report


@dataclass(frozen=True, slots=True)
class Pair:
    name: TableName  # as named upstream (for a downstream-only table: as it would be)
    down_name: TableName
    on_up: bool
    on_down: bool


async def _pairs(up: Source, down: Source, scope: Scope) -> list[Pair]:
    """Every table of either side, paired by name: upstream ones first, in name order."""
    down_names = {down.locate(n): n for n in await down.tables(scope.down)}
    pairs = []
    for n in await up.tables(scope.up):
        found = down_names.pop(down.locate(scope.to_down(n)), None)
        pairs.append(Pair(n, found or scope.to_down(n), True, found is not None))
    pairs += [Pair(scope.to_up(n), n, False, True) for n in down_names.values()]
    return pairs


async def _table(
    up: Source, down: Source, pair: Pair, chunk_size: int, max_diffs: int, share: Share
) -> TableReport:
    report = TableReport(str(pair.name), str(pair.down_name))
    if not (pair.on_up and pair.on_down):
        report.presence = Presence.DOWNSTREAM_ONLY if pair.on_down else Presence.UPSTREAM_ONLY
        log.info("%s: %s", pair.name, report.presence.value)
        return report
    p = plan(await up.shape(pair.name), await down.shape(pair.down_name), up.kind, down.kind)
    report.key, report.key_kind = p.key or p.columns, p.key_kind
    report.columns_only_upstream, report.columns_only_downstream = p.only_up, p.only_down
    report.notes += p.notes
    report.checksum = "sql" if p.pushdown else "python"
    log.info("%s: comparing on %s %s", pair.name, p.key_kind, ", ".join(p.key))
    check = TableCheck(up, down, p, report, chunk_size=chunk_size, max_diffs=max_diffs)
    return await check.run(share)
