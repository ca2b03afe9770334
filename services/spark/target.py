"""What a job hands a downstream: per table the rows that end present and the keys that end
absent, as DataFrames; and the ``Target`` port the MySQL, SQLite and lake writers implement.

``targets.open_target`` picks the writer by URL scheme. A target reports how far it has got to
a ``Progress`` (``services.spark.progress``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import DataFrame

from services.spark.progress import Progress
from tributary.staging.format import StagedTable


@dataclass(frozen=True)
class TableChanges:
    table: StagedTable
    upserts: DataFrame  # the table's columns: rows to REPLACE
    deletes: DataFrame | None  # the primary-key columns: keys to DELETE (None: none)
    changes: DataFrame | None = None  # the compacted changes with commit ts (the lake's input)


@dataclass(frozen=True)
class Applied:
    upserts: int
    deletes: int


class Target(Protocol):
    def apply(
        self, start_ts: int, end_ts: int, tables: Sequence[TableChanges], progress: Progress
    ) -> Applied:
        """Write every table's changes; all of them become visible together where the
        downstream can do that (MySQL, SQLite: one transaction), and a rerun converges.
        Reports how far each table has got with ``progress.table(t, fraction)``."""
        ...
