"""Which ``Target`` writes a downstream URL: one writer per scheme, from one small dict.

``mysql://`` (``sinks.mysql``'s URL), ``sqlite://PATH`` (``sinks.schemes``'s form),
``parquet:///DIR`` (the lake). Invariant: this module sits above the port (``target``) and
its writers; none of them imports it, so a new writer is one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import SplitResult, urlsplit

from pyspark.sql import SparkSession

from services.spark.errors import JobError
from services.spark.jdbc import MysqlEndpoint
from services.spark.lake import LakeTarget
from services.spark.mysql_target import MysqlTarget
from services.spark.sqlite_target import SqliteTarget
from services.spark.target import Target

Opener = Callable[[SparkSession, SplitResult, int], Target]


def _mysql(spark: SparkSession, parts: SplitResult, partitions: int) -> Target:
    return MysqlTarget(spark, MysqlEndpoint.from_url(parts), partitions=partitions)


def _sqlite(spark: SparkSession, parts: SplitResult, partitions: int) -> Target:
    return SqliteTarget(parts.netloc + parts.path)


def _lake(spark: SparkSession, parts: SplitResult, partitions: int) -> Target:
    return LakeTarget(parts.netloc + parts.path)


_WRITERS: dict[str, Opener] = {"mysql": _mysql, "sqlite": _sqlite, "parquet": _lake}


def open_target(spark: SparkSession, url: str, *, partitions: int = 4) -> Target:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    opener = _WRITERS.get(scheme)
    if opener is None:
        raise JobError(f"no Spark writer for {scheme}:// (mysql://, sqlite://, parquet://)")
    return opener(spark, parts, partitions)
