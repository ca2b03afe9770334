"""Applying compacted changes to MySQL/MariaDB: Spark writes them into staging tables in
parallel, then one downstream transaction merges every table.

Per table ``db.t`` two scratch tables in ``db`` (dropped and recreated at every run, dropped
after the merge): ``_tributary_cu_<hash>_u`` with t's columns and ``..._d`` with its primary
key, both made by ``CREATE TABLE .. SELECT .. FROM t WHERE 0`` (t's exact column types, no
keys). Spark fills them over ``partitions`` JDBC connections. Then, in one transaction::

    DELETE t FROM db.t AS t JOIN db.<d> AS d ON t.k1 = d.k1 AND ...;
    REPLACE INTO db.t (c1, ...) SELECT c1, ... FROM db.<u>;
    ... (every table) ...
    COMMIT

Invariant: a job killed at any point before COMMIT leaves t as it was (the scratch tables are
rebuilt by the next run); the merge is a function of the staged range alone, so a rerun after
a COMMIT whose outcome was lost writes the same rows again (idempotent).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from services.spark.jdbc import JdbcSession, MysqlEndpoint
from services.spark.target import Applied, Progress, TableChanges
from sinks.sql import MYSQL, quote

log = logging.getLogger(__name__)

BATCH = 5000  # rows per JDBC batch


def _q(name: str) -> str:
    return quote(MYSQL, name, params=False)


def scratch_names(schema: str, table: str) -> tuple[str, str]:
    digest = hashlib.sha1(f"{schema}.{table}".encode()).hexdigest()[:12]
    return f"_tributary_cu_{digest}_u", f"_tributary_cu_{digest}_d"


def merge_statements(
    schema: str, table: str, columns: Sequence[str], key: Sequence[str], deletes: bool
) -> list[str]:
    """The statements merging one table's scratch tables into it (inside the transaction)."""
    up, down = scratch_names(schema, table)
    target = f"{_q(schema)}.{_q(table)}"
    cols = ",".join(_q(c) for c in columns)
    out = [f"USE {_q(schema)}"]  # a multi-table DELETE with aliases wants a default database
    if deletes:
        on = " AND ".join(f"t.{_q(k)} = d.{_q(k)}" for k in key)
        out.append(f"DELETE t FROM {target} AS t JOIN {_q(schema)}.{_q(down)} AS d ON {on}")
    out.append(f"REPLACE INTO {target} ({cols}) SELECT {cols} FROM {_q(schema)}.{_q(up)}")
    return out


class MysqlTarget:
    def __init__(
        self, spark: SparkSession, endpoint: MysqlEndpoint, *, partitions: int = 4
    ) -> None:
        self._spark = spark
        self._endpoint = endpoint
        self._partitions = partitions

    def apply(
        self, start_ts: int, end_ts: int, tables: Sequence[TableChanges], progress: Progress
    ) -> Applied:
        with JdbcSession(self._spark, self._endpoint) as s:
            for tc in tables:
                self._prepare(s, tc)
        upserts = deletes = 0
        for tc in tables:
            t = tc.table
            up, down = scratch_names(t.schema, t.table)
            upserts += self._write(tc.upserts, t.schema, up)
            if tc.deletes is not None:
                deletes += self._write(tc.deletes, t.schema, down)
            progress("staged", table=t.qualified)
        progress("merging", tables=len(tables))
        with JdbcSession(self._spark, self._endpoint) as s:
            s.begin()
            try:
                for tc in tables:
                    t = tc.table
                    for sql in merge_statements(
                        t.schema, t.table, t.column_names, t.primary_key, tc.deletes is not None
                    ):
                        s.execute(sql)
                s.commit()
            except BaseException:
                s.rollback()
                raise
            for tc in tables:
                for name in scratch_names(tc.table.schema, tc.table.table):
                    s.execute(f"DROP TABLE IF EXISTS {_q(tc.table.schema)}.{_q(name)}")
        return Applied(upserts, deletes)

    def _prepare(self, s: JdbcSession, tc: TableChanges) -> None:
        t = tc.table
        up, down = scratch_names(t.schema, t.table)
        source = f"{_q(t.schema)}.{_q(t.table)}"
        for name, cols in ((up, t.column_names), (down, t.primary_key)):
            scratch = f"{_q(t.schema)}.{_q(name)}"
            s.execute(f"DROP TABLE IF EXISTS {scratch}")
            select = ",".join(_q(c) for c in cols)
            s.execute(f"CREATE TABLE {scratch} SELECT {select} FROM {source} WHERE 0")

    def _write(self, df: DataFrame, schema: str, name: str) -> int:
        """Append ``df`` to a scratch table over ``partitions`` connections; rows written."""
        rows = df.count()
        if rows:
            options = {
                **self._endpoint.properties(),
                "batchsize": str(BATCH),
                "isolationLevel": "NONE",
                "numPartitions": str(self._partitions),
            }
            df.write.jdbc(self._endpoint.jdbc_url, f"{_q(schema)}.{_q(name)}", "append", options)
        return rows
