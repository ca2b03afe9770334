"""Comparing one table present on both sides, chunk by chunk, following its ``Plan``.

For each chunk both sides are read at once. With a pushed-down checksum only the sums travel,
and the rows of a chunk are fetched only when its sums differ; otherwise the rows are fetched,
made canonical and summed in Python, and kept for the row diff only when the sums differ.
Every chunk's rows are in the same chunk on both sides (``chunks``), so each differing chunk
is diffed on its own and at most one chunk's rows are held at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tributary.checker.canon import Row, canon_row, row_hash
from tributary.checker.chunks import Chunk, boundaries, chunk_where, chunks_from
from tributary.checker.diff import diff_rows
from tributary.checker.errors import CheckerError
from tributary.checker.model import ChunkSum, Where
from tributary.checker.pairing import Plan
from tributary.checker.report import TableReport
from tributary.checker.source import Source
from tributary.telemetry.progress import Progress

log = logging.getLogger(__name__)

T = TypeVar("T")
U = TypeVar("U")
_SUM_MOD = 1 << 128


async def both(up: Coroutine[Any, Any, T], down: Coroutine[Any, Any, U]) -> tuple[T, U]:
    """Await the two sides concurrently; the first failure is raised as itself."""
    try:
        async with asyncio.TaskGroup() as tg:
            tu = tg.create_task(up, name="checker-upstream")
            td = tg.create_task(down, name="checker-downstream")
    except BaseExceptionGroup as eg:
        first = eg.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from eg
    return tu.result(), td.result()


def python_sum(rows: Sequence[Row]) -> ChunkSum:
    return ChunkSum(len(rows), sum(map(row_hash, rows)) % _SUM_MOD)


@dataclass(frozen=True, slots=True)
class Share:
    """Where one table's chunks move the comparison's progress: from ``start`` by ``width``."""

    progress: Progress | None = None
    start: float = 0.0
    width: float = 1.0

    def chunk_done(self, rows: int, done: int, chunks: int) -> None:
        if self.progress is not None:
            self.progress.count("chunks")
            self.progress.estimate(self.start + self.width * done / chunks)
            self.progress.add(rows)


class TableCheck:
    """Compares one table pair; ``run`` fills and returns the ``TableReport``."""

    def __init__(
        self,
        up: Source,
        down: Source,
        plan: Plan,
        report: TableReport,
        *,
        chunk_size: int,
        max_diffs: int,
    ) -> None:
        self.up, self.down, self.plan, self.report = up, down, plan, report
        self.chunk_size = chunk_size
        self.max_diffs = max_diffs
        key_cols = [(plan.up.column(k), plan.down.column(k), plan.type_of(k)) for k in plan.key]
        self.up_terms = [up.key_term(u, t) for u, _, t in key_cols]
        self.down_terms = [down.key_term(d, t) for _, d, t in key_cols]

    async def run(self, share: Share | None = None) -> TableReport:
        """Compare every chunk; ``share`` counts each chunk's upstream rows as it is done."""
        plan, report = self.plan, self.report
        share = share or Share()
        bounds: list[Row] = []
        if plan.chunked:
            key_types = [plan.type_of(k) for k in plan.key]
            bounds = await boundaries(
                self.up, plan.up.name, self.up_terms, plan.key, key_types, self.chunk_size
            )
        chunks = chunks_from(bounds)
        report.chunks = len(chunks)
        for chunk in chunks:
            rows_before = report.rows_upstream
            try:
                await self._chunk(chunk)
            except CheckerError as e:
                what = f"{report.table}, chunk {chunk.describe(plan.key)}: {e}"
                raise type(e)(what, retriable=e.retriable) from e
            share.chunk_done(report.rows_upstream - rows_before, chunk.index + 1, len(chunks))
        return report

    async def _chunk(self, chunk: Chunk) -> None:
        plan, report = self.plan, self.report
        up_where = chunk_where(self.up_terms, chunk)
        down_where = chunk_where(self.down_terms, chunk)
        up_rows: list[Row] | None = None
        down_rows: list[Row] | None = None
        if plan.pushdown:
            up_cols = [plan.up.column(c) for c in plan.columns]
            down_cols = [plan.down.column(c) for c in plan.columns]
            up_sum, down_sum = await both(
                self.up.checksum(plan.up.name, up_cols, up_where),
                self.down.checksum(plan.down.name, down_cols, down_where),
            )
        else:
            up_rows, down_rows = await self._fetch(up_where, down_where)
            up_sum, down_sum = python_sum(up_rows), python_sum(down_rows)
        report.rows_upstream += up_sum.count
        report.rows_downstream += down_sum.count
        if up_sum == down_sum:
            return
        report.chunks_differing += 1
        log.info("%s: chunk %s differs", report.table, chunk.describe(plan.key))
        if up_rows is None or down_rows is None:
            up_rows, down_rows = await self._fetch(up_where, down_where)
        for diff in diff_rows(plan.columns, plan.key_index, up_rows, down_rows):
            report.add(diff, self.max_diffs)

    async def _fetch(self, up_where: Where, down_where: Where) -> tuple[list[Row], list[Row]]:
        plan = self.plan
        raw_up, raw_down = await both(
            self.up.rows(plan.up.name, plan.columns, up_where),
            self.down.rows(plan.down.name, plan.columns, down_where),
        )
        return (
            [canon_row(plan.types, r) for r in raw_up],
            [canon_row(plan.types, r) for r in raw_down],
        )
