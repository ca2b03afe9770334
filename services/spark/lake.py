"""The Parquet lake: compacted changes of each range, partitioned by table and commit date,
with a manifest of the commit-ts range every file covers (``services.spark.lake_manifest``).

Layout under the lake root (a local or mounted directory)::

    _manifest.json
    <schema>.<table>/commit_date=YYYY-MM-DD/part-<start>-<end>-<n>.parquet

Each file row: ``_commit_ts``, ``_seq``, ``_op`` (``U`` row present after the range, ``D``
row gone), then the table's columns; the commit date is the UTC day of the commit ts' physical
time. Steps: Spark writes into ``_tmp/<start>-<end>/`` (emptied first), the files move to their
partitions under range-named names, then the manifest is replaced atomically (temporary file +
rename), and only then are superseded files deleted. Invariant: the manifest lists only files
that exist and are complete, whatever point a job is killed at.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from services.spark.lake_manifest import MANIFEST, LakeFile, LakeRange, Manifest
from services.spark.progress import Progress
from services.spark.target import Applied, TableChanges
from tributary.staging.format import COMMIT_TS, OP, OP_DELETE, OP_UPSERT, SEQ

log = logging.getLogger(__name__)

DATE = "commit_date"


def with_commit_date(changes: DataFrame) -> DataFrame:
    """``changes`` plus the UTC commit date of ``_commit_ts`` (physical ms = ts >> 18)."""
    seconds = (F.shiftright(F.col(COMMIT_TS), 18) / 1000).cast("long")
    return changes.withColumn(DATE, F.date_format(F.timestamp_seconds(seconds), "yyyy-MM-dd"))


def load_manifest(root: Path) -> Manifest:
    path = root / MANIFEST
    return Manifest.from_json(path.read_text()) if path.exists() else Manifest()


def _ts_range(path: Path) -> tuple[int, int, int]:
    """(rows, min, max commit ts) of one Parquet file, from its footer statistics."""
    meta = pq.ParquetFile(path).metadata
    col = meta.schema.names.index(COMMIT_TS)
    lows, highs = [], []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(col).statistics
        if stats is not None and stats.has_min_max:
            lows.append(int(stats.min))
            highs.append(int(stats.max))
    if not lows:  # no statistics: read the column
        values = pq.read_table(path, columns=[COMMIT_TS]).column(0).to_pylist()
        lows, highs = [min(values)], [max(values)]
    return meta.num_rows, min(lows), max(highs)


class LakeTarget:
    def __init__(self, root: str) -> None:
        self._root = Path(root)

    def apply(
        self, start_ts: int, end_ts: int, tables: Sequence[TableChanges], progress: Progress
    ) -> Applied:
        root = self._root
        tmp = root / "_tmp" / f"{start_ts}-{end_ts}"
        shutil.rmtree(tmp, ignore_errors=True)
        upserts = deletes = 0
        files: list[LakeFile] = []
        for tc in tables:
            t = tc.table
            changes = tc.changes
            if changes is None:  # a snapshot (bulk load): rows present as of end_ts
                changes = tc.upserts.select(
                    F.lit(end_ts).alias(COMMIT_TS),
                    F.lit(0).cast("long").alias(SEQ),
                    F.lit(OP_UPSERT).alias(OP),
                    *t.column_names,
                )
            dated = with_commit_date(changes).cache()
            counts = {r[0]: int(r[1]) for r in dated.groupBy(OP).count().collect()}
            upserts += counts.get(OP_UPSERT, 0)
            deletes += counts.get(OP_DELETE, 0)
            out = tmp / t.qualified
            dated.repartition(DATE).write.partitionBy(DATE).parquet(str(out))
            dated.unpersist()
            files += self._place(out, t.qualified, start_ts, end_ts)
            progress("written", table=t.qualified)
            progress.table(t, 1.0)
        manifest, gone = load_manifest(root).add(LakeRange(start_ts, end_ts, tuple(files)))
        keep = {f.path for f in files}
        staged = root / (MANIFEST + ".tmp")
        staged.write_text(manifest.to_json())
        os.replace(staged, root / MANIFEST)
        for f in gone:
            if f.path not in keep:
                (root / f.path).unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        return Applied(upserts, deletes)

    def _place(self, out: Path, table: str, start_ts: int, end_ts: int) -> list[LakeFile]:
        placed: list[LakeFile] = []
        for part_dir in sorted(out.glob(f"{DATE}=*")):
            date = part_dir.name.split("=", 1)[1]
            dest_dir = self._root / table / part_dir.name
            dest_dir.mkdir(parents=True, exist_ok=True)
            for n, src in enumerate(sorted(part_dir.glob("*.parquet"))):
                rel = f"{table}/{part_dir.name}/part-{start_ts}-{end_ts}-{n:05d}.parquet"
                rows, low, high = _ts_range(src)
                os.replace(src, self._root / rel)
                placed.append(LakeFile(rel, table, date, rows, low, high))
        return placed
