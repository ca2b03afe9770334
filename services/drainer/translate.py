"""One pulled binlog -> one ``change.Txn``: DDL through the schema tracker, rows decoded.

* A fake binlog gives a checkpoint-only Txn (no rows, no DDL).
* A DDL binlog (``ddl_job_id > 0``): the job comes from the DDL history; jobs below its schema
  version that the tracker has not seen are applied first (catch-up after a restart), then
  the job itself; the Txn carries the statement and its database. A cancelled or rolled-back
  job, the DeleteOnly step of DROP COLUMN, sequence ``select setval`` and jobs that change
  nothing replicated give a checkpoint-only Txn.
* A DML binlog: every ``TableMutation`` of the PrewriteValue, rows in ``sequence`` order,
  decoded with the table TiDB wrote them with (the one at the PrewriteValue's schema version,
  catching up first when the history has jobs the tracker has not seen up to it) and written
  as the downstream has the table then (``SchemaTracker.rows_table``: a late transaction after
  a rename writes under the new names; a table first written after a DDL, as the DDL left
  it). Rows of truncated tables are
  dropped; column ids the table did not have at that version (a column being added, the hidden
  ``_tidb_rowid``) are left out.

Invariant: the Txn is built whole or not at all: bad input raises a ``DrainerError`` naming
the commit ts (``UndecodableBinlog``, ``UnknownTable``, ``SchemaError``, ``DdlJobMissing``).
Rows are decoded by each table version's compiled decoder (``TrackedTable.decoder``), values
as ``services.drainer.rowvalues`` describes (tidb-binlog's ``formatData``, ENUM/SET by name).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Iterator
from typing import NoReturn, TypeVar

from services.drainer.errors import DrainerError
from services.drainer.item import PulledBinlogItem
from services.drainer.rowvalues import Decoder
from services.drainer.schema import SchemaError, SchemaTracker, TrackedTable
from tributary.change import Ddl, RowChange, RowKind, TableInfo, Txn
from tributary.ddlhistory import Action, DdlHistory, DdlHistoryError, DdlJob, SchemaState
from tributary.tidbcodec import CodecError, DecodeError
from tributary.wire.binlog import MutationType
from tributary.wire.views import (
    BinlogView,
    MalformedMessage,
    PrewriteValueView,
    TableMutationView,
    parse_binlog,
    parse_prewrite_value,
)

log = logging.getLogger(__name__)

UTC = dt.UTC
_INSERT, _UPDATE, _DELETE = MutationType.Insert, MutationType.Update, MutationType.DeleteRow
_INS, _UPD, _DEL = RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE
_NAMES = {_INSERT: "insert", _UPDATE: "update", _DELETE: "delete"}
_View = TypeVar("_View", BinlogView, PrewriteValueView)
# The decoder gives only the table's columns (old and new alike for updates): no re-checks.
_decoded = RowChange.decoded


class TranslateError(DrainerError):
    """A binlog cannot be turned into a transaction."""


class UndecodableBinlog(TranslateError):
    """The payload, its PrewriteValue or one of its rows is not what TiDB writes."""


class DdlJobMissing(TranslateError):
    """The DDL history has no job with the binlog's job id (yet): retrying may find it."""

    retriable = True


class HistoryUnavailable(TranslateError):
    """The DDL history could not be read."""


@contextlib.contextmanager
def _at(commit_ts: int, what: str) -> Iterator[None]:
    """Re-raise the errors of the layers below as drainer errors naming the binlog."""
    where = f"binlog at commit ts {commit_ts}: {what}"
    try:
        yield
    except SchemaError as e:
        raise type(e)(f"{where}: {e}", retriable=e.retriable) from e
    except CodecError as e:
        raise UndecodableBinlog(f"{where}: {e}") from e
    except DdlHistoryError as e:
        raise HistoryUnavailable(f"{where}: DDL history: {e}", retriable=e.retriable) from e


async def to_txn(
    item: PulledBinlogItem, schema: SchemaTracker, history: DdlHistory, *, tz: dt.tzinfo = UTC
) -> Txn:
    """The transaction (or DDL, or checkpoint-only marker) that ``item`` carries."""
    if item.is_fake:
        return Txn(item.commit_ts, item.start_ts)
    with _at(item.commit_ts, "payload"):
        binlog = _parse(parse_binlog, item.payload, "Binlog")
    if binlog.ddl_job_id > 0:
        return await _ddl_txn(item, binlog, schema, history)
    return await _dml_txn(item, binlog, schema, history, tz)


def _parse(parse: Callable[[bytes], _View], data: bytes, what: str) -> _View:
    try:
        return parse(data)
    except MalformedMessage as e:
        raise DecodeError(f"not a {what} message: {e}") from e


async def _catch_up(schema: SchemaTracker, history: DdlHistory, upto: int, ts: int) -> None:
    """Apply the history's jobs with versions in (schema.version, upto], then mark ``upto``;
    a job that finished after ``ts`` (the commit ts being translated) has its binlog still to
    come, so it is not shown downstream yet (``SchemaTracker.rows_table``)."""
    if upto <= schema.version:
        return
    for job in await history.jobs_since(schema.version):
        if job.schema_version > upto:
            break
        schema.apply(job, shown=job.finished_ts <= ts)
    schema.advance_to(upto)


async def _ddl_txn(
    item: PulledBinlogItem, binlog: BinlogView, schema: SchemaTracker, history: DdlHistory
) -> Txn:
    ts, job_id = item.commit_ts, binlog.ddl_job_id
    query = binlog.ddl_query.decode("utf-8", "replace")
    marker = Txn(ts, item.start_ts)
    if query.lstrip().lower().startswith("select setval"):
        return marker
    with _at(ts, f"DDL job {job_id}"):
        job = await history.get_job(job_id)
        if job is None:
            raise DdlJobMissing(f"binlog at commit ts {ts}: DDL job {job_id} is not in the history")
        if _not_replicated(job, binlog):
            log.info("DDL job %d at commit ts %d changes nothing downstream", job_id, ts)
            return marker
        await _catch_up(schema, history, job.schema_version - 1, ts)
        applied = schema.apply(job)
    if applied is None:
        return marker
    log.info("DDL at commit ts %d (job %d): %s", ts, job_id, query or job.query)
    ddl = Ddl(applied.schema, query or job.query, applied.table)
    return Txn(ts, item.start_ts, ddl=ddl, schema_version=job.schema_version)


def _not_replicated(job: DdlJob, binlog: BinlogView) -> bool:
    if not job.is_done or job.schema_version <= 0:  # cancelled, rolled back, failed
        return True
    # DROP COLUMN writes a binlog at its DeleteOnly step too; the final one applies it.
    delete_only = binlog.ddl_schema_state == SchemaState.DELETE_ONLY
    return delete_only and job.type == Action.DROP_COLUMN


async def _dml_txn(
    item: PulledBinlogItem,
    binlog: BinlogView,
    schema: SchemaTracker,
    history: DdlHistory,
    tz: dt.tzinfo,
) -> Txn:
    ts = item.commit_ts
    with _at(ts, "prewrite value"):
        pv = _parse(parse_prewrite_value, binlog.prewrite_value, "PrewriteValue")
        if pv.schema_version > schema.version:
            await _catch_up(schema, history, pv.schema_version, ts)
    rows: list[RowChange] = []
    for mut in pv.mutations:
        if schema.is_truncated(mut.table_id):
            log.debug("dropping rows of truncated table %d at commit ts %d", mut.table_id, ts)
            continue
        try:
            table = schema.rows_table(mut.table_id, pv.schema_version)
        except SchemaError as e:
            where = f"binlog at commit ts {ts}: table id {mut.table_id}"
            raise type(e)(f"{where}: {e}", retriable=e.retriable) from e
        try:
            decoded = _mutation_rows(mut, table, tz)
            rows.extend(_narrowed(decoded, table) if table.partial else decoded)
        except CodecError as e:
            what = f"table {table.sink.qualified} (id {table.id})"
            raise UndecodableBinlog(f"binlog at commit ts {ts}: {what}: {e}") from e
    try:
        return Txn(ts, item.start_ts, rows=tuple(rows), schema_version=pv.schema_version)
    except ValueError as e:
        raise UndecodableBinlog(f"binlog at commit ts {ts}: {e}") from e


def _narrowed(rows: list[RowChange], table: TrackedTable) -> list[RowChange]:
    """Rows of a ``partial`` table, each with the table cut to the columns it holds."""
    width = len(table.sink.columns)
    return [
        r
        if len(r.values) == width
        else RowChange.decoded(r.kind, table.narrowed(r.values), r.values, r.old_values)
        for r in rows
    ]


def _mutation_rows(mut: TableMutationView, table: TrackedTable, tz: dt.tzinfo) -> list[RowChange]:
    """The mutation's rows in ``sequence`` order; DecodeError naming the row that is bad."""
    if mut.deleted_ids or mut.deleted_pks:
        raise DecodeError("obsolete deleted_ids/deleted_pks rows are not supported")
    decoder, sink = table.decoder(tz), table.sink
    inserted, updated, deleted = mut.inserted_rows, mut.updated_rows, mut.deleted_rows
    seq = mut.sequence
    counts = (seq.count(_INSERT), seq.count(_UPDATE), seq.count(_DELETE))
    if counts != (len(inserted), len(updated), len(deleted)) or sum(counts) != len(seq):
        _check_sequence(mut)
    try:
        if len(inserted) == len(seq):
            return [_decoded(_INS, sink, decoder.inserted(r)) for r in inserted]
        streams = {_INSERT: iter(inserted), _UPDATE: iter(updated), _DELETE: iter(deleted)}
        return [_row_change(kind, next(streams[kind]), decoder, sink) for kind in seq]
    except CodecError:
        _check_rows(mut, decoder)  # finds the bad row and names it
        raise


def _check_sequence(mut: TableMutationView) -> NoReturn:
    """Raises the DecodeError saying how ``sequence`` disagrees with the rows."""
    lists = {_INSERT: mut.inserted_rows, _UPDATE: mut.updated_rows, _DELETE: mut.deleted_rows}
    used = dict.fromkeys(lists, 0)
    for i, kind in enumerate(mut.sequence):
        rows = lists.get(kind)
        if rows is None:
            raise DecodeError(f"sequence[{i}] is mutation type {int(kind)}, not supported")
        if used[kind] == len(rows):
            raise DecodeError(f"sequence[{i}] wants {_NAMES[kind]} row {used[kind]}: none left")
        used[kind] += 1
    unread = {_NAMES[k]: len(lists[k]) - n for k, n in used.items() if n != len(lists[k])}
    raise DecodeError(f"rows missing from the sequence: {unread}")


def _check_rows(mut: TableMutationView, decoder: Decoder) -> None:
    """Decode the rows one by one in ``sequence`` order: the first that fails raises, named."""
    lists = {_INSERT: mut.inserted_rows, _UPDATE: mut.updated_rows, _DELETE: mut.deleted_rows}
    used = dict.fromkeys(lists, 0)
    decode = {_INSERT: decoder.inserted, _UPDATE: decoder.updated, _DELETE: decoder.deleted}
    for kind in mut.sequence:
        try:
            decode[kind](lists[kind][used[kind]])
        except CodecError as e:
            raise DecodeError(f"{_NAMES[kind]} row {used[kind]}: {e}") from e
        used[kind] += 1


def _row_change(kind: int, row: bytes, decoder: Decoder, sink: TableInfo) -> RowChange:
    if kind == _INSERT:
        return _decoded(_INS, sink, decoder.inserted(row))
    if kind == _UPDATE:
        old, new = decoder.updated(row)
        return _decoded(_UPD, sink, new, old)
    return _decoded(_DEL, sink, decoder.deleted(row))
