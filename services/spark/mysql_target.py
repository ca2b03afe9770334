"""Applying compacted changes to MySQL/MariaDB: Spark writes them as CSV files, then one
downstream transaction loads every table (``services.spark.load_data``).

Per table ``db.t`` with tombstones, a scratch table ``_tributary_cu_<hash>_d`` in ``db`` with
t's primary-key columns (``CREATE TABLE .. SELECT .. FROM t WHERE 0``: t's exact types, no
keys; dropped and recreated at every run, dropped after the merge) is loaded with the keys
before the transaction. Then, in one transaction::

    DELETE t FROM db.t AS t JOIN db.<d> AS d ON t.k1 = d.k1 AND ...;
    LOAD DATA LOCAL INFILE '<upserts part 0>' REPLACE INTO TABLE db.t ...;
    ... (every part, every table) ...
    COMMIT

Progress: a table counts half done once its CSV files are written, the other half by the bytes
of its files loaded (tombstone keys, then upserts).

Invariant: a job killed at any point before COMMIT leaves t as it was (InnoDB rolls the
loads back with the transaction; the scratch tables and CSV files are rebuilt by the next
run); the merge is a function of the staged range alone, so a rerun after a COMMIT whose
outcome was lost writes the same rows again (idempotent).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from services.spark.jdbc import JdbcSession, MysqlEndpoint
from services.spark.load_data import load_statement, write_csv
from services.spark.progress import Progress
from services.spark.target import Applied, TableChanges
from tributary.sql import MYSQL, quote
from tributary.staging.format import StagedTable

log = logging.getLogger(__name__)


def _q(name: str) -> str:
    return quote(MYSQL, name, params=False)


def scratch_names(schema: str, table: str) -> tuple[str, str]:
    """The scratch tables of ``schema.table``: ``_u`` (no longer used; dropped) and ``_d``."""
    digest = hashlib.sha1(f"{schema}.{table}".encode()).hexdigest()[:12]
    return f"_tributary_cu_{digest}_u", f"_tributary_cu_{digest}_d"


@dataclass
class _Files:
    """One table's CSV files: upserts into the table, tombstone keys into its ``_d``."""

    changes: TableChanges
    upserts: list[Path] = field(default_factory=list)
    deletes: list[Path] = field(default_factory=list)
    upsert_rows: int = 0
    delete_rows: int = 0
    size: int = 0  # bytes of both sets
    loaded: int = 0  # bytes loaded so far

    def written(self) -> None:
        self.size = sum(p.stat().st_size for p in (*self.upserts, *self.deletes))

    def load(self, path: Path, progress: Progress) -> None:
        """``path`` was loaded: the table is half done (written) plus half its bytes loaded."""
        self.loaded += path.stat().st_size
        progress.table(self.changes.table, 0.5 + 0.5 * self.loaded / max(1, self.size))


def merge_statements(t: StagedTable, upserts: Sequence[Path], deletes: bool) -> list[str]:
    """The statements merging one table's changes into it (inside the transaction)."""
    _, down = scratch_names(t.schema, t.table)
    target = f"{_q(t.schema)}.{_q(t.table)}"
    out = [f"USE {_q(t.schema)}"]  # a multi-table DELETE with aliases wants a default database
    if deletes:
        on = " AND ".join(f"t.{_q(k)} = d.{_q(k)}" for k in t.primary_key)
        out.append(f"DELETE t FROM {target} AS t JOIN {_q(t.schema)}.{_q(down)} AS d ON {on}")
    for path in upserts:
        out.append(load_statement(path, t.schema, t.table, t.columns, replace=True))
    return out


class MysqlTarget:
    """``work_dir`` holds the CSV files while the job runs (a temporary directory if None; in
    a cluster it must be a volume the executors and the driver share, as the staging one)."""

    def __init__(
        self,
        spark: SparkSession,
        endpoint: MysqlEndpoint,
        *,
        partitions: int = 4,
        work_dir: Path | None = None,
    ) -> None:
        self._spark = spark
        self._endpoint = endpoint
        self._partitions = partitions
        self._work_dir = work_dir

    def apply(
        self, start_ts: int, end_ts: int, tables: Sequence[TableChanges], progress: Progress
    ) -> Applied:
        work = self._work_dir or Path(tempfile.mkdtemp(prefix="tributary-load-"))
        try:
            files = []
            for tc in tables:
                files.append(self._write(tc, work))
                progress.table(tc.table, 0.5)
            for f in files:
                progress("staged", table=f.changes.table.qualified)
            with JdbcSession(self._spark, self._endpoint) as s:
                for f in files:
                    self._prepare(s, f, progress)
                progress("merging", tables=len(tables))
                self._merge(s, files, progress)
                for f in files:
                    for name in scratch_names(f.changes.table.schema, f.changes.table.table):
                        s.execute(f"DROP TABLE IF EXISTS {_q(f.changes.table.schema)}.{_q(name)}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return Applied(sum(f.upsert_rows for f in files), sum(f.delete_rows for f in files))

    def _write(self, tc: TableChanges, work: Path) -> _Files:
        """Both CSV sets of one table, written by Spark (``partitions`` files at most)."""
        t = tc.table
        base = work / hashlib.sha1(t.qualified.encode()).hexdigest()[:12]
        out = _Files(tc)
        df = tc.upserts.coalesce(self._partitions)
        out.upserts, out.upsert_rows = write_csv(df, t.columns, base / "u")
        if tc.deletes is not None:
            key = [c for name in t.primary_key for c in t.columns if c.name == name]
            df = tc.deletes.coalesce(self._partitions)
            out.deletes, out.delete_rows = write_csv(df, key, base / "d")
        out.written()
        return out

    def _prepare(self, s: JdbcSession, f: _Files, progress: Progress) -> None:
        """(Re)create the table's ``_d`` scratch table and load the tombstone keys into it."""
        t = f.changes.table
        up, down = scratch_names(t.schema, t.table)
        s.execute(f"DROP TABLE IF EXISTS {_q(t.schema)}.{_q(up)}")  # left by older versions
        scratch = f"{_q(t.schema)}.{_q(down)}"
        s.execute(f"DROP TABLE IF EXISTS {scratch}")
        if not f.deletes:
            return
        select = ",".join(_q(c) for c in t.primary_key)
        s.execute(
            f"CREATE TABLE {scratch} SELECT {select} FROM {_q(t.schema)}.{_q(t.table)} WHERE 0"
        )
        key = [c for name in t.primary_key for c in t.columns if c.name == name]
        for path in f.deletes:
            s.execute(load_statement(path, t.schema, down, key, replace=False))
            f.load(path, progress)

    def _merge(self, s: JdbcSession, files: Sequence[_Files], progress: Progress) -> None:
        s.begin()
        try:
            for f in files:
                sqls = merge_statements(f.changes.table, f.upserts, bool(f.deletes))
                first_load = len(sqls) - len(f.upserts)  # the loads come last, in file order
                for sql in sqls[:first_load]:
                    s.execute(sql)
                for sql, path in zip(sqls[first_load:], f.upserts, strict=True):
                    s.execute(sql)
                    f.load(path, progress)
            s.commit()
        except BaseException:
            s.rollback()
            raise
