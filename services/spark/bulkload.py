"""The bulk-load job: a table snapshot read in parallel by primary-key ranges from a MySQL/
MariaDB source, written to a sink, with the source's binlog position taken with the snapshot.

``python -m services.spark.bulkload --source mysql://.. --table db.t --sink URL --position F``.

Consistency: a control session holds ``FLUSH TABLES db.t WITH READ LOCK`` while it reads the
binlog position (``@@gtid_binlog_pos`` and ``SHOW MASTER STATUS``) and while Spark reads the
table over ``partitions`` connections (``id`` ranges between MIN and MAX) into its cache; then
it unlocks, before the sink is written. Writers of ``db.t`` wait during the read, so every
change of the table before the position is in the snapshot and none after it: streaming from
the position (a binlog reader, a capture changefeed) continues with no gap and no double. The
position is written to ``F`` (JSON, temporary file + rename) only after the sink was written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from services.spark.errors import JobError
from services.spark.jdbc import JdbcSession, MysqlEndpoint
from services.spark.mysql_target import _q
from services.spark.session import spark_session
from services.spark.target import Progress, TableChanges, open_target
from staging.format import StagedColumn, StagedTable, arrow_kind

log = logging.getLogger(__name__)

_NUMERIC = ("tinyint", "smallint", "mediumint", "int", "bigint")


@dataclass(frozen=True)
class SourcePosition:
    table: str
    rows: int
    gtid_binlog_pos: str
    binlog_file: str
    binlog_pos: int


def _describe(s: JdbcSession, schema: str, table: str) -> StagedTable:
    cols = s.query(
        "SELECT column_name, column_type, column_key FROM information_schema.columns "
        f"WHERE table_schema = '{schema}' AND table_name = '{table}' ORDER BY ordinal_position"
    )
    if not cols:
        raise JobError(f"{schema}.{table}: no such table on the source")
    pk = tuple(str(c[0]) for c in cols if c[2] == "PRI")
    if not pk:
        raise JobError(f"{schema}.{table} has no primary key; a bulk load needs one")
    columns = tuple(StagedColumn(str(n), str(t), arrow_kind(str(t))) for n, t, _ in cols)
    return StagedTable(schema, table, columns, pk, "")


def snapshot(
    spark: SparkSession, source: MysqlEndpoint, schema: str, table: str, partitions: int
) -> tuple[StagedTable, DataFrame, SourcePosition]:
    """Read the table under a read lock; (its description, the cached rows, the position)."""
    name = f"{_q(schema)}.{_q(table)}"
    with JdbcSession(spark, source) as s:
        info = _describe(s, schema, table)
        s.execute(f"FLUSH TABLES {name} WITH READ LOCK")
        try:
            gtid = s.query("SELECT @@gtid_binlog_pos")[0][0] or ""
            status = s.query("SHOW MASTER STATUS")
            if not status:
                raise JobError("the source has no binary log (log-bin is off)")
            key = info.primary_key[0]
            low, high = s.query(f"SELECT MIN({_q(key)}), MAX({_q(key)}) FROM {name}")[0]
            numeric = info.columns[info.column_names.index(key)].mysql_type.startswith(_NUMERIC)
            options = source.properties()
            if len(info.primary_key) == 1 and numeric and low is not None and high is not None:
                df = spark.read.jdbc(
                    source.jdbc_url,
                    name,
                    key,
                    int(low),
                    int(high) + 1,
                    partitions,
                    properties=options,
                )
            else:
                df = spark.read.jdbc(source.jdbc_url, name, properties=options)
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
            rows = df.count()
        finally:
            s.execute("UNLOCK TABLES")
    position = SourcePosition(
        f"{schema}.{table}", rows, gtid, str(status[0][0]), int(status[0][1] or 0)
    )
    log.info("snapshot of %s: %d rows at %s", name, rows, position)
    return info, df, position


def bulk_load(
    spark: SparkSession,
    source: MysqlEndpoint,
    schema: str,
    table: str,
    sink_url: str,
    progress: Progress | None = None,
    *,
    partitions: int = 4,
) -> SourcePosition:
    report = progress or Progress()
    info, df, position = snapshot(spark, source, schema, table, partitions)
    report("snapshot", rows=position.rows)
    try:
        target = open_target(spark, sink_url, partitions=partitions)
        target.apply(0, 0, [TableChanges(info, df.select(*info.column_names), None)], report)
    finally:
        df.unpersist()
    return position


def save_position(path: str | Path, position: SourcePosition) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(asdict(position)))
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.spark.bulkload", description=__doc__)
    ap.add_argument("--source", default=os.environ.get("BULKLOAD_SOURCE_URL", ""))
    ap.add_argument("--table", required=True, help="schema.table")
    ap.add_argument("--sink", default=os.environ.get("BULKLOAD_SINK_URL", ""))
    ap.add_argument("--position", required=True, help="file the source position goes to")
    ap.add_argument("--master", default=None)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    schema, _, table = args.table.partition(".")
    spark = spark_session("tributary-bulkload", args.master)
    try:
        position = bulk_load(
            spark,
            MysqlEndpoint.from_url(args.source),
            schema,
            table,
            args.sink,
            partitions=args.partitions,
        )
        save_position(args.position, position)
    except JobError as e:
        print(json.dumps({"event": "failed", "error": str(e), "retriable": e.retriable}))
        return 75 if e.retriable else 1
    finally:
        spark.stop()
    print(json.dumps({"event": "done", **asdict(position)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
