"""Writing a staged range: transactions in commit order in, Parquet files per table out.

Invariants: changes keep their upstream order in ``_seq`` (commit order, then order inside the
transaction); ``range.json`` is written last and atomically (temporary file + rename), so a
reader that finds it finds every row of the range; a directory that held an older attempt is
emptied first, so a rerun of an export never mixes two attempts. DDLs are refused: a DDL ends a
range (the caller applies it by streaming after the range). Tables need a primary key, the key
compaction works on. An I/O failure (a full disk above all) is a ``StagingError`` naming the
staging directory; it is retriable, since the range can be staged again once space returns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tributary.change import Row, RowKind, SqlValue, TableInfo, Txn
from tributary.staging.format import (
    COMMIT_TS,
    META_COLUMNS,
    OP,
    OP_DELETE,
    OP_UPSERT,
    RANGE_FILE,
    SEQ,
    RangeInfo,
    StagedColumn,
    StagedTable,
    StagingError,
    arrow_kind,
    table_directory,
)

log = logging.getLogger(__name__)

FLUSH_ROWS = 200_000  # buffered changes (all tables) that make ``full`` true
ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "bytes": pa.binary(), "str": pa.string()}


def _as_int(v: SqlValue) -> int | None:
    return None if v is None else int(v)


def _as_float(v: SqlValue) -> float | None:
    return None if v is None else float(v)


def _as_bytes(v: SqlValue) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, int):  # BIT values may arrive as integers
        return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
    return str(v).encode()


def _as_str(v: SqlValue) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return str(v)


CONVERT: dict[str, Callable[[SqlValue], object]] = {
    "int": _as_int,
    "float": _as_float,
    "bytes": _as_bytes,
    "str": _as_str,
}


def _column(
    values: list[object], kind: pa.DataType, convert: Callable[[SqlValue], object]
) -> pa.Array:
    """``values`` as an Arrow array of ``kind``: in one call when Arrow takes them as they are
    (the usual case: ints, floats, text, bytes), else converted one by one first (``CONVERT``:
    an integer for a text column, a Decimal for a float one, BIT as an integer, ...)."""
    try:
        return pa.array(values, type=kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return pa.array([convert(v) for v in values], type=kind)  # type: ignore[arg-type]


class _TableBuffer:
    def __init__(self, info: TableInfo, root: Path) -> None:
        if not info.primary_key:
            raise StagingError(f"{info.qualified} has no primary key; catch-up needs one")
        clash = [c for c in info.column_names if c in META_COLUMNS]
        if clash:
            raise StagingError(f"{info.qualified}: column names {clash} are reserved")
        self.info = info
        self.columns = tuple(
            StagedColumn(c.name, c.mysql_type, arrow_kind(c.mysql_type)) for c in info.columns
        )
        self.converters = [CONVERT[c.kind] for c in self.columns]
        self.directory = table_directory(info.schema, info.table)
        self.path = root / self.directory
        self.path.mkdir(parents=True, exist_ok=True)
        self.schema = pa.schema(
            [(COMMIT_TS, pa.int64()), (SEQ, pa.int64()), (OP, pa.string())]
            + [(c.name, ARROW_TYPES[c.kind]) for c in self.columns]
        )
        self.meta_converters: list[Callable[[SqlValue], object]] = [_as_int, _as_int, _as_str]
        self.meta: list[list[object]] = []
        self.values: list[list[object]] = []
        self.by_name: list[tuple[str, list[object]]] = []
        self._reset()
        self.rows = 0
        self.deletes = 0
        self.files = 0

    def add(self, commit_ts: int, seq: int, op: str, row: Row) -> None:
        self.meta[0].append(commit_ts)
        self.meta[1].append(seq)
        self.meta[2].append(op)
        if op == OP_DELETE:
            self.deletes += 1
        get = row.get
        for name, out in self.by_name:
            out.append(get(name))

    @property
    def buffered(self) -> int:
        return len(self.meta[0])

    def flush(self) -> None:
        if not self.buffered:
            return
        columns = [
            _column(a, f.type, conv)
            for a, f, conv in zip(
                self.meta + self.values,
                self.schema,
                self.meta_converters + self.converters,
                strict=True,
            )
        ]
        table = pa.Table.from_arrays(columns, schema=self.schema)
        pq.write_table(table, self.path / f"part-{self.files:05d}.parquet")
        self.files += 1
        self.rows += table.num_rows
        self._reset()

    def _reset(self) -> None:
        self.meta = [[], [], []]
        self.values = [[] for _ in self.columns]
        self.by_name = list(zip([c.name for c in self.columns], self.values, strict=True))

    def staged(self) -> StagedTable:
        i = self.info
        return StagedTable(
            i.schema, i.table, self.columns, i.primary_key, self.directory, self.rows, self.deletes
        )


@contextlib.contextmanager
def _io(root: Path, what: str) -> Iterator[None]:
    """An OSError inside (pyarrow's I/O errors are OSErrors too) as a retriable StagingError."""
    try:
        yield
    except OSError as e:
        raise StagingError(f"staging directory {root}: {what} failed: {e}", retriable=True) from e


class StagingWriter:
    """Stage the transactions after ``start_ts`` into ``directory`` (emptied first)."""

    def __init__(self, directory: str | Path, start_ts: int, flush_rows: int = FLUSH_ROWS) -> None:
        self.root = Path(directory)
        with _io(self.root, "emptying"):
            if self.root.exists():
                shutil.rmtree(self.root)
            self.root.mkdir(parents=True)
        self.start_ts = start_ts
        self.last_ts = start_ts
        self._flush_rows = flush_rows
        self._tables: dict[tuple[str, str], _TableBuffer] = {}
        self._seq = 0
        self.rows = 0  # row changes added (as the upstream counts them)
        self.txns = 0  # transactions with rows added

    def add(self, txn: Txn) -> None:
        """Stage one transaction (a marker only moves ``last_ts``); commit ts must increase."""
        if txn.ddl is not None:
            raise StagingError(f"commit ts {txn.commit_ts} is a DDL: a DDL ends a staged range")
        if txn.commit_ts <= self.last_ts:
            raise StagingError(f"commit ts {txn.commit_ts} does not follow {self.last_ts}")
        self.last_ts = txn.commit_ts
        if not txn.rows:
            return
        self.txns += 1
        for change in txn.rows:
            buf = self._buffer(change.table)
            if change.kind is RowKind.DELETE:
                self._put(buf, txn.commit_ts, OP_DELETE, change.values)
            elif change.kind is RowKind.UPDATE:
                old = change.old_values
                assert old is not None
                pk = change.table.primary_key
                if any(old.get(c) != change.values.get(c) for c in pk):
                    self._put(buf, txn.commit_ts, OP_DELETE, old)
                self._put(buf, txn.commit_ts, OP_UPSERT, change.values)
            else:
                self._put(buf, txn.commit_ts, OP_UPSERT, change.values)
            self.rows += 1

    def _put(self, buf: _TableBuffer, commit_ts: int, op: str, row: Row) -> None:
        buf.add(commit_ts, self._seq, op, row)
        self._seq += 1

    def fits(self, info: TableInfo) -> bool:
        """Whether rows of ``info`` can join the range: the table is not staged yet, or staged
        with this definition (a transaction that started before a DDL and committed after it
        writes the table as it was; its rows belong to another range)."""
        buf = self._tables.get((info.schema, info.table))
        return buf is None or buf.info is info or buf.info == info

    def _buffer(self, info: TableInfo) -> _TableBuffer:
        key = (info.schema, info.table)
        buf = self._tables.get(key)
        if buf is None:
            with _io(self.root, f"a directory for {info.qualified}"):
                buf = self._tables[key] = _TableBuffer(info, self.root)
        elif buf.info is not info and buf.info != info:
            raise StagingError(f"{info.qualified} changed its columns inside one staged range")
        return buf

    @property
    def full(self) -> bool:
        """Enough is buffered that ``flush`` should run (in a worker thread, it blocks)."""
        return sum(b.buffered for b in self._tables.values()) >= self._flush_rows

    def flush(self) -> None:
        with _io(self.root, "writing Parquet"):
            for buf in self._tables.values():
                buf.flush()

    def close(self, end_ts: int | None = None) -> RangeInfo:
        """Flush, then write ``range.json`` for ``(start_ts, end_ts]`` (default: the last
        commit ts added); the range is complete from this point on."""
        end = self.last_ts if end_ts is None else end_ts
        if end < self.last_ts:
            raise StagingError(f"range end {end} is before the last staged commit {self.last_ts}")
        self.flush()
        info = RangeInfo(
            self.start_ts,
            end,
            self.rows,
            self.txns,
            tuple(b.staged() for b in self._tables.values()),
        )
        tmp = self.root / (RANGE_FILE + ".tmp")
        with _io(self.root, f"writing {RANGE_FILE}"):
            with open(tmp, "w") as f:
                f.write(info.to_json())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.root / RANGE_FILE)
        log.info(
            "staged (%d, %d]: %d row changes of %d transactions in %d tables",
            self.start_ts,
            end,
            self.rows,
            self.txns,
            len(self._tables),
        )
        return info
