"""What a job hands a downstream: per table the rows that end present and the keys that end
absent, as DataFrames; and the ``Target`` port the MySQL, SQLite and lake writers implement.

``open_target`` picks the writer by URL scheme: ``mysql://`` (``sinks.mysql``'s URL),
``sqlite://PATH`` (``sinks.schemes``'s form), ``parquet:///DIR`` (the lake). A target reports
how far it has got to a ``Progress`` (``services.spark.progress``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from pyspark.sql import DataFrame, SparkSession

from services.spark.errors import JobError
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


def open_target(spark: SparkSession, url: str, *, partitions: int = 4) -> Target:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "mysql":
        from services.spark.jdbc import MysqlEndpoint
        from services.spark.mysql_target import MysqlTarget

        return MysqlTarget(spark, MysqlEndpoint.from_url(parts), partitions=partitions)
    if scheme == "sqlite":
        from services.spark.sqlite_target import SqliteTarget

        return SqliteTarget(parts.netloc + parts.path)
    if scheme == "parquet":
        from services.spark.lake import LakeTarget

        return LakeTarget(parts.netloc + parts.path)
    raise JobError(f"no Spark writer for {scheme}:// (mysql://, sqlite://, parquet://)")
