"""The storage lake job: a storage sink's files (TiCDC's layout, ``csv`` or ``canal-json``, in a
directory or an S3 bucket prefix) into one Parquet table per upstream table, holding each primary
key's latest row as of the directory's checkpoint.

``python -m services.spark.storage_lake --storage 'file:///DIR?protocol=csv&...' --lake DIR``
(the storage URL is the changefeed's sink URL, ``s3://BUCKET/PREFIX?...&endpoint=...`` too: its
protocol, CSV options, date separator and terminator say how to read the files, its S3
parameters where they are). The driver reads ``metadata`` and then lists the files
(``tributary.sinks.storage.reader``, whose rules make every file holding a row at or below the
checkpoint visible); each data file is one task that reads it through the same store (the executors'
Python, botocore for S3: no Hadoop S3 connector is involved) and decodes its rows with the table
version's schema file; per table, rows above the checkpoint are left out, and of each primary key
the change with the highest (commit ts, file order, line) wins, a key whose last change is a delete
disappears. So a row written twice after a crash (the same commit ts in two files) counts once, and
a CSV ``U`` record (the new row only) replaces the key's row.

Output: ``<lake>/<schema>.<table>/`` Parquet with the table's columns as its newest version has
them (a column added later is NULL in rows written before it, which is what the upstream holds
for a column added without a default) and ``_commit_ts``; ``<lake>/_storage_lake.json`` names
the checkpoint and the tables. A table is written to ``<lake>/_tmp/`` and then swapped in, so
a killed job leaves every table either as before or as now. DDL other than added columns is
not replayed (a renamed or truncated table is not followed); tables without a primary key are
skipped (named in the summary): a CSV update holds no old row to find them by.

Exit status 0 on success, 1 otherwise; the summary is the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from services.spark.session import spark_session
from tributary.change import SqlValue
from tributary.sinks.port import SinkError
from tributary.sinks.storage import reader
from tributary.sinks.storage.settings import StorageSettings, parse_url
from tributary.sinks.storage.store import Store, open_store
from tributary.sinks.storage.tabledef import TableCol, TableDefinition

log = logging.getLogger(__name__)

SUMMARY = "_storage_lake.json"
COMMIT_TS, FILE, LINE, OP = "_commit_ts", "_file", "_line", "_op"
_INTS = frozenset({"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR", "BIT"})
_BINARY = frozenset({"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"})


def spark_type(col: TableCol) -> T.DataType:
    """The lake column type of a TiCDC column: integers as long (BIGINT UNSIGNED as
    decimal(20,0)), DECIMAL as decimal, FLOAT and DOUBLE as double, binary strings as binary,
    the rest (temporal values, text, ENUM, SET, JSON) as the text the files hold."""
    kind, _, rest = col.type.partition(" ")
    if kind == "BIGINT" and rest == "UNSIGNED":
        return T.DecimalType(20, 0)
    if kind in _INTS:
        return T.LongType()
    if kind == "DECIMAL":
        return T.DecimalType(int(col.precision or 10), int(col.scale or 0))
    if kind in ("FLOAT", "DOUBLE"):
        return T.DoubleType()
    if kind in _BINARY:
        return T.BinaryType()
    return T.StringType()


@dataclass(frozen=True, slots=True)
class TablePlan:
    name: str  # schema.table
    columns: tuple[TableCol, ...]  # the newest version's
    key: tuple[str, ...]  # its primary key
    files: tuple[tuple[int, str, TableDefinition], ...]  # (order, relative path, its version)


def plan(store: Store, settings: StorageSettings) -> tuple[int, list[TablePlan], list[str]]:
    """The checkpoint, the tables to build, and the tables skipped (no primary key)."""
    try:
        checkpoint = reader.checkpoint(store)
        scan = reader.scan(store, settings) if checkpoint is not None else None
    except OSError as e:
        raise SinkError(f"{store.location}: {e}") from e
    if checkpoint is None or scan is None:
        raise SinkError(f"{store.location} has no metadata: the sink has written nothing yet")
    grouped: dict[tuple[str, str], list[tuple[int, str, TableDefinition]]] = {}
    for order, (place, relative) in enumerate(scan.data):
        schema_file = scan.schemas.get((place.schema, place.table, place.version))
        if schema_file is None:
            continue  # written after the listing passed its schema file: above the checkpoint
        grouped.setdefault((place.schema, place.table), []).append(
            (order, relative, schema_file.definition)
        )
    plans, skipped = [], []
    for (schema, table), files in sorted(grouped.items()):
        newest = files[-1][2]
        columns = newest.columns or ()
        key = tuple(c.name for c in columns if c.is_pk == "true")
        if not key:
            skipped.append(f"{schema}.{table}")
            continue
        plans.append(TablePlan(f"{schema}.{table}", columns, key, tuple(files)))
    return checkpoint, plans, skipped


def _task_rows(
    task: tuple[StorageSettings, int, str, TableDefinition, tuple[TableCol, ...], int],
) -> Iterator[tuple[Any, ...]]:
    """One data file's rows at or below the checkpoint, each value in its lake column's type
    (runs in an executor, which opens the store itself)."""
    settings, order, relative, definition, columns, checkpoint = task
    kinds = [(c.name, spark_type(c)) for c in columns]
    store = open_store(settings)
    for line, (ts, row) in enumerate(reader.read_rows(store, relative, definition, settings)):
        if ts > checkpoint:
            continue
        values = [_coerce(row.values.get(name), kind) for name, kind in kinds]
        op = "D" if row.kind.value == "delete" else "U"
        yield (ts, order, line, op, *values)


def _coerce(value: SqlValue, kind: T.DataType) -> SqlValue:
    """A decoded value as its lake column holds it (canal-json gives ENUM, SET and BIT as
    numbers, and an unsigned BIGINT is a decimal here)."""
    if value is None:
        return None
    if isinstance(kind, T.DecimalType):
        return value if isinstance(value, Decimal) else Decimal(str(value))
    if isinstance(kind, T.LongType):
        return int(value) if not isinstance(value, bytes) else int.from_bytes(value, "big")
    if isinstance(kind, T.DoubleType):
        return float(value)
    if isinstance(kind, T.BinaryType):
        return value if isinstance(value, bytes) else str(value).encode()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def table_frame(
    spark: SparkSession, settings: StorageSettings, table: TablePlan, checkpoint: int
) -> DataFrame:
    names = tuple(c.name for c in table.columns)
    schema = T.StructType(
        [
            T.StructField(COMMIT_TS, T.LongType(), False),
            T.StructField(FILE, T.LongType(), False),
            T.StructField(LINE, T.LongType(), False),
            T.StructField(OP, T.StringType(), False),
            *(T.StructField(c.name, spark_type(c), True) for c in table.columns),
        ]
    )
    tasks = [
        (settings, order, relative, definition, table.columns, checkpoint)
        for order, relative, definition in table.files
    ]
    rdd = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(_task_rows)
    changes = spark.createDataFrame(rdd, schema)
    newest = Window.partitionBy(*table.key).orderBy(
        F.col(COMMIT_TS).desc(), F.col(FILE).desc(), F.col(LINE).desc()
    )
    return (
        changes.withColumn("_rank", F.row_number().over(newest))
        .filter((F.col("_rank") == 1) & (F.col(OP) != "D"))
        .select(*names, COMMIT_TS)
    )


def build_lake(spark: SparkSession, settings: StorageSettings, lake: Path) -> dict[str, Any]:
    checkpoint, tables, skipped = plan(open_store(settings), settings)
    counts: dict[str, int] = {}
    for table in tables:
        frame = table_frame(spark, settings, table, checkpoint).cache()
        counts[table.name] = frame.count()
        tmp = lake / "_tmp" / table.name
        shutil.rmtree(tmp, ignore_errors=True)
        frame.write.parquet(str(tmp))
        frame.unpersist()
        final = lake / table.name
        old = lake / "_tmp" / f"{table.name}.old"
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        log.info(
            "storage lake: %s: %d rows at checkpoint %d", table.name, counts[table.name], checkpoint
        )
    summary = {"checkpoint-ts": checkpoint, "tables": counts, "skipped": skipped}
    (lake / f"{SUMMARY}.tmp").write_text(json.dumps(summary))
    os.replace(lake / f"{SUMMARY}.tmp", lake / SUMMARY)
    return summary


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="storage_lake", description=__doc__.split("\n\n")[0])
    p.add_argument("--storage", required=True, help="the storage sink's URL (file://..., s3://...)")
    p.add_argument("--lake", required=True, help="the lake's directory")
    p.add_argument("--master", default=None, help="Spark master (default SPARK_MASTER or local[*])")
    p.add_argument("--driver-memory", default="1g")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    try:
        settings = parse_url(urlsplit(args.storage))
    except SinkError as e:
        print(json.dumps({"event": "failed", "error": str(e)}))
        return 1
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors decode with our code
    lake = Path(args.lake)
    lake.mkdir(parents=True, exist_ok=True)
    spark = spark_session("tributary-storage-lake", args.master, driver_memory=args.driver_memory)
    try:
        summary = build_lake(spark, settings, lake)
    except SinkError as e:
        log.error("storage lake failed: %s", e)
        print(json.dumps({"event": "failed", "error": str(e)}))
        return 1
    finally:
        spark.stop()
    print(json.dumps({"event": "done", **summary}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
