"""Layout of a staged commit-ts range, shared by its writer (the drainer) and its reader (Spark).

A range is a directory::

    <dir>/range.json                               written last: present = the export is complete
    <dir>/tables/<quoted schema.table>/part-NNNNN.parquet

``range.json`` holds the range ``(start_ts, end_ts]`` (start: the checkpoint the export began
after; end: the commit ts the checkpoint moves to once the range is applied), the row and
transaction counts, and per table its columns, kind of each column and primary key.

Each Parquet row is one *keyed* change: ``_commit_ts`` (int64), ``_seq`` (int64, the change's
position in the range: strictly increasing in upstream order), ``_op`` (``U``: the key's row
after the change, ``D``: the key's row is gone), then the table's columns. An UPDATE keeping its
key is one ``U``; an UPDATE changing it is ``D`` of the old key then ``U`` of the new one, so
compaction per key sees every key's own history. Example, t(id PK, v)::

    commit 10: INSERT (1,a)           -> (10, 0, U, 1, a)
    commit 11: UPDATE (1,a) -> (2,a)  -> (11, 1, D, 1, a), (11, 2, U, 2, a)

Column kinds (``arrow_kind``): ``int`` (int64) for signed integers and unsigned ones that fit,
``float`` (float64), ``bytes`` (binary) for binary strings and BIT, ``str`` for everything else
(decimal, temporal and JSON values arrive as MySQL literals; BIGINT UNSIGNED is text, since
Spark has no unsigned 64-bit type). Invariant: the column kinds of a table never change within
a range (a DDL ends a range).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tributary.errors import TributaryError

FORMAT_VERSION = 1
RANGE_FILE = "range.json"
TABLES_DIR = "tables"
COMMIT_TS, SEQ, OP = "_commit_ts", "_seq", "_op"
META_COLUMNS = (COMMIT_TS, SEQ, OP)
OP_UPSERT, OP_DELETE = "U", "D"

_INT = re.compile(r"^(tinyint|smallint|mediumint|int|integer|bigint|bool|boolean|year)\b")
_FLOAT = re.compile(r"^(float|double|real)\b")
_BYTES = re.compile(r"^(binary|varbinary|tinyblob|blob|mediumblob|longblob|bit)\b")


class StagingError(TributaryError):
    """A staged range cannot be written or read; ``retriable`` says whether retrying may help."""


def arrow_kind(mysql_type: str) -> str:
    """``int``, ``float``, ``bytes`` or ``str``: how a column of ``mysql_type`` is staged."""
    t = mysql_type.strip().lower()
    if _INT.match(t):
        return "str" if t.startswith("bigint") and "unsigned" in t else "int"
    if _FLOAT.match(t):
        return "float"
    if _BYTES.match(t):
        return "bytes"
    return "str"


@dataclass(frozen=True, slots=True)
class StagedColumn:
    name: str
    mysql_type: str
    kind: str  # see arrow_kind


@dataclass(frozen=True, slots=True)
class StagedTable:
    schema: str
    table: str
    columns: tuple[StagedColumn, ...]
    primary_key: tuple[str, ...]
    directory: str  # relative to the range directory
    rows: int = 0
    deletes: int | None = None  # staged ``D`` rows (None: not recorded, as in older ranges)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "table": self.table,
            "columns": [[c.name, c.mysql_type, c.kind] for c in self.columns],
            "primary_key": list(self.primary_key),
            "directory": self.directory,
            "rows": self.rows,
            "deletes": self.deletes,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StagedTable:
        return cls(
            d["schema"],
            d["table"],
            tuple(StagedColumn(n, t, k) for n, t, k in d["columns"]),
            tuple(d["primary_key"]),
            d["directory"],
            int(d["rows"]),
            None if d.get("deletes") is None else int(d["deletes"]),
        )


def table_directory(schema: str, table: str) -> str:
    return f"{TABLES_DIR}/{quote(schema, safe='')}.{quote(table, safe='')}"


@dataclass(frozen=True, slots=True)
class RangeInfo:
    """What ``range.json`` says: the range ``(start_ts, end_ts]`` and its tables."""

    start_ts: int
    end_ts: int
    rows: int
    txns: int
    tables: tuple[StagedTable, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT_VERSION,
                "start_ts": self.start_ts,
                "end_ts": self.end_ts,
                "rows": self.rows,
                "txns": self.txns,
                "tables": [t.to_json() for t in self.tables],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> RangeInfo:
        d = json.loads(text)
        if d.get("format") != FORMAT_VERSION:
            raise StagingError(f"unknown staging format {d.get('format')!r}")
        return cls(
            int(d["start_ts"]),
            int(d["end_ts"]),
            int(d["rows"]),
            int(d["txns"]),
            tuple(StagedTable.from_json(t) for t in d["tables"]),
        )


def read_range(directory: str | Path) -> RangeInfo:
    """The range staged in ``directory``; a StagingError if the export did not complete."""
    path = Path(directory) / RANGE_FILE
    try:
        return RangeInfo.from_json(path.read_text())
    except FileNotFoundError as e:
        raise StagingError(f"{directory}: no {RANGE_FILE}, the export did not complete") from e
    except (ValueError, KeyError, TypeError) as e:
        raise StagingError(f"{path}: unreadable: {e}") from e
