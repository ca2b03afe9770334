r"""Bulk rows into MySQL/MariaDB by ``LOAD DATA LOCAL INFILE``: Spark writes a DataFrame as CSV
files, the driver's JDBC connection loads each file (``services.spark.jdbc``, with
``allowLocalInfile``). This is what makes the catch-up fast: the server parses a file at a
time instead of executing batches of INSERTs, and rows go straight into their table.

Invariant: every value reads back exactly as staged, NULL included. The CSV is quoted only
where needed, quotes inside a value doubled, no escape character, so MySQL's
``OPTIONALLY ENCLOSED BY '"' ESCAPED BY ''`` reads the same field back, newlines and commas
included; an unquoted ``NULL`` field is SQL NULL. A text value could itself be the word NULL,
so text columns are written with a one-character prefix the load strips, and binary columns
(CSV has no binary type) as hex the load unhexes. Example, t(id int, s text, b blob)::

    (1, 'NULL', x'00ff') -> 1,vNULL,00FF     (2, NULL, NULL) -> 2,NULL,NULL
    (3, '"hi", all', x'') -> 3,"v""hi"", all",""

    LOAD DATA LOCAL INFILE '...' REPLACE INTO TABLE `db`.`t` CHARACTER SET utf8mb4
      FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '"' ESCAPED BY ''
      LINES TERMINATED BY '\n' (`id`, @c1, @c2) SET `s` = SUBSTRING(@c1, 2), `b` = UNHEX(@c2)
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from tributary.sql import MYSQL, quote
from tributary.staging.format import StagedColumn

PREFIX = "v"  # before every text value: no text value reads as the NULL marker
CSV_OPTIONS = {
    "header": "false",
    "quote": '"',
    "escape": '"',  # a quote inside a quoted value is doubled
    "nullValue": "NULL",
    "emptyValue": '""',
    "ignoreLeadingWhiteSpace": "false",
    "ignoreTrailingWhiteSpace": "false",
    "lineSep": "\n",
    "encoding": "UTF-8",
}


def _q(name: str) -> str:
    return quote(MYSQL, name, params=False)


def csv_frame(df: DataFrame, columns: Sequence[StagedColumn]) -> DataFrame:
    """``df``'s ``columns`` as the CSV encodes them (text prefixed, binary as hex)."""
    out = []
    for c in columns:
        col = F.col(f"`{c.name}`")
        if c.kind == "str":
            col = F.concat(F.lit(PREFIX), col)
        elif c.kind == "bytes":
            col = F.hex(col)
        out.append(col.alias(c.name))
    return df.select(*out)


def write_csv(
    df: DataFrame, columns: Sequence[StagedColumn], directory: Path
) -> tuple[list[Path], int]:
    """Write ``df`` under ``directory`` (replaced); the CSV files, in order, and the row count
    (observed while writing: one pass over ``df``, nothing cached)."""
    if directory.exists():
        shutil.rmtree(directory)
    seen = Observation()
    observed = csv_frame(df, columns).observe(seen, F.count(F.lit(1)).alias("rows"))
    observed.write.options(**CSV_OPTIONS).csv(str(directory))
    return sorted(directory.glob("part-*.csv")), int(seen.get["rows"])


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def load_statement(
    path: Path, schema: str, table: str, columns: Sequence[StagedColumn], *, replace: bool
) -> str:
    """The ``LOAD DATA LOCAL INFILE`` of one CSV file ``write_csv`` wrote into ``schema.table``."""
    targets: list[str] = []
    sets: list[str] = []
    for i, c in enumerate(columns):
        if c.kind == "str":
            targets.append(f"@c{i}")
            sets.append(f"{_q(c.name)} = SUBSTRING(@c{i}, {len(PREFIX) + 1})")
        elif c.kind == "bytes":
            targets.append(f"@c{i}")
            sets.append(f"{_q(c.name)} = UNHEX(@c{i})")
        else:
            targets.append(_q(c.name))
    mode = "REPLACE " if replace else ""
    sql = (
        f"LOAD DATA LOCAL INFILE {_literal(str(path))} {mode}INTO TABLE "
        f"{_q(schema)}.{_q(table)} CHARACTER SET utf8mb4 "
        "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' "
        f"LINES TERMINATED BY '\\n' ({', '.join(targets)})"
    )
    return sql + (f" SET {', '.join(sets)}" if sets else "")
