"""Binlog events -> whole transactions (``SourceTxn``), in upstream order.

A transaction is the events between its start (a QUERY ``BEGIN``, or a MariaDB GTID event not
flagged standalone) and its end (XID, or QUERY ``COMMIT`` for non-transactional engines); its
rows keep upstream order. A QUERY outside a transaction is a statement of its own: schema DDL
becomes a DDL transaction (``Ddl(schema, query, table)``), anything else (GRANT, CREATE USER,
...) a checkpoint-only marker. Rows of tables the filter drops are not even decoded; a
transaction left with nothing is a marker too, so positions and timestamps still move.

``Txn.schema_version`` stays 0: the binlog has no upstream schema version, each row carries
its own ``TableInfo`` from its TABLE_MAP, and a number counted from where the reader opened
would differ between a first read and a resume (the tracker's counters are diagnostics).

Invariants: every emitted transaction carries the position just after its last event (a
dump resumed there starts with the next transaction) and a ts from ``timestamps.next_ts``;
events are never reordered; a ROLLBACK drops the rows gathered since the start.

Worked example (MariaDB, file ``b.000001``): GTID 0-1-7 (not standalone) @ 400,
TABLE_MAP t @ 480, WRITE_ROWS (2 rows) @ 560, XID @ 591 -> one SourceTxn with 2 INSERTs at
``b.000001:591@0-1-7``; then GTID 0-1-8 (standalone), QUERY ``ALTER TABLE t ...`` @ 720 -> a
DDL SourceTxn at ``b.000001:720@0-1-8``.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

from tributary.change import Ddl, RowChange, TableFilter, Txn
from tributary.sources.mysql import ddl as ddlparse
from tributary.sources.mysql import events as ev
from tributary.sources.mysql import payload
from tributary.sources.mysql.errors import MalformedEvent, SourceError
from tributary.sources.mysql.position import Position
from tributary.sources.mysql.rows import decode_rows, rows_table_id
from tributary.sources.mysql.schema import CompiledTable, SchemaTracker
from tributary.sources.mysql.tablemap import table_name
from tributary.sources.mysql.timestamps import next_ts

log = logging.getLogger(__name__)

_SKIP_IN_TXN = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO")


@dataclass(frozen=True)
class SourceTxn:
    txn: Txn
    position: Position  # where to resume AFTER this transaction
    resolved: bool = False  # a resolved-ts marker (``resolved``), not a binlog transaction


class Assembler:
    """Feed raw events (checksum still on) in dump order; ``feed`` returns finished txns."""

    def __init__(
        self,
        start: Position,
        last_ts: int,
        schema: SchemaTracker,
        table_filter: TableFilter,
        *,
        checksum: bool,
    ) -> None:
        self.file = start.file
        self.pos = start.pos
        self.gtid = start.gtid
        self.last_ts = last_ts
        self.schema = schema
        self._filter = table_filter
        self._checksum = checksum
        self._fde = ev.FormatDescription(4, "", bytes(40), checksum)
        self._in_txn = False
        self._rows: list[RowChange] = []
        self._tables: dict[int, CompiledTable | None] = {}
        self.events = 0
        self.heard: Position | None = None  # where the last unanswered heartbeat says we are

    @property
    def in_txn(self) -> bool:
        return self._in_txn

    @property
    def position(self) -> Position:
        return Position(self.file, self.pos, self.gtid)

    def feed(self, raw: bytes) -> SourceTxn | None:
        """One raw event; a truncated or garbled one is a ``MalformedEvent`` naming it."""
        try:
            return self._feed(raw)
        except SourceError:
            raise
        except (IndexError, ValueError, struct.error) as e:
            tp = ev.name(raw[4]) if len(raw) > 4 else "event"
            raise MalformedEvent(f"cannot read {tp} after {self.file}:{self.pos}: {e!r}") from e

    def _feed(self, raw: bytes) -> SourceTxn | None:
        self.events += 1
        tp = raw[4]
        if tp == ev.HEARTBEAT_EVENT or tp == ev.HEARTBEAT_V2_EVENT:
            self.heard = ev.heartbeat_position(raw, self._checksum) or self.position
            return None
        if tp == ev.FORMAT_DESCRIPTION_EVENT:
            self._fde = ev.parse_format_description(raw)
            self._checksum = self._fde.checksum
            self.schema.mariadb = "mariadb" in self._fde.server_version.lower()
            return None
        event = ev.check_crc32(raw) if self._checksum else raw
        ts, _tp, server_id, _size, log_pos = ev.header(event)
        if tp == ev.ROTATE_EVENT:
            self.file, self.pos = ev.parse_rotate(event)
            self._tables.clear()
            return None
        if log_pos and not event[17] & ev.ARTIFICIAL_FLAG:
            self.pos = log_pos
        if tp == ev.TRANSACTION_PAYLOAD_EVENT:
            return self._on_payload(event, log_pos)
        return self._dispatch(event, tp, ts, server_id, log_pos)

    def _dispatch(
        self, event: bytes, tp: int, ts: int, server_id: int, log_pos: int
    ) -> SourceTxn | None:
        """One event (checksum removed): handled, known harmless, or an error naming it."""
        if tp in ev.ROWS_EVENTS:
            self._on_rows(event, tp)
        elif tp == ev.TABLE_MAP_EVENT:
            self._on_table_map(event)
        elif tp == ev.XID_EVENT:
            return self._commit(ts)
        elif tp == ev.QUERY_EVENT:
            return self._on_query(event, ts)
        elif tp == ev.MARIADB_GTID_EVENT:
            gtid = ev.parse_mariadb_gtid(event, server_id)
            self.gtid = gtid.text
            self._begin(not gtid.standalone)
        elif tp == ev.GTID_EVENT:
            self.gtid = ev.parse_mysql_gtid(event).text
        elif tp in ev.UNSUPPORTED:
            raise MalformedEvent(
                f"event {ev.name(tp)} at {self.file}:{log_pos} is not supported (MariaDB's "
                "compressed binlog events or MySQL's JSON partial updates): turn "
                "log_bin_compress / binlog_row_value_options off upstream"
            )
        elif tp not in ev.HARMLESS and not event[17] & ev.IGNORABLE_FLAG:
            raise MalformedEvent(
                f"event {ev.name(tp)} at {self.file}:{log_pos} is not understood by this source"
                f"{' inside a transaction' if self._in_txn else ''}; stopping rather than "
                "dropping it"
            )
        return None

    def _on_payload(self, event: bytes, log_pos: int) -> SourceTxn | None:
        """A compressed transaction: its inner events go through ``_dispatch`` in order; the
        position stays at the end of the payload event (inner events have no place of their
        own in the file), so the transaction resumes after it as a whole."""
        out: SourceTxn | None = None
        for inner in payload.inner_events(event):
            ts, tp, server_id, _size, _pos = ev.header(inner)
            if tp in (ev.TRANSACTION_PAYLOAD_EVENT, ev.FORMAT_DESCRIPTION_EVENT, ev.ROTATE_EVENT):
                raise MalformedEvent(
                    f"event {ev.name(tp)} inside the transaction payload at {self.file}:{log_pos}"
                )
            txn = self._dispatch(inner, tp, ts, server_id, log_pos)
            if txn is not None:
                if out is not None:
                    raise MalformedEvent(
                        f"two transactions in one transaction payload at {self.file}:{log_pos}"
                    )
                out = txn
        return out

    def _begin(self, in_txn: bool) -> None:
        self._in_txn = in_txn
        self._rows = []

    def _on_table_map(self, event: bytes) -> None:
        post = self._fde.post_header(ev.TABLE_MAP_EVENT) or 8
        table_id, schema, table = table_name(event, post)
        if self._filter.allows(schema, table):
            self._tables[table_id] = self.schema.on_table_map(event, post)
        else:
            self._tables[table_id] = None

    def _on_rows(self, event: bytes, tp: int) -> None:
        table_id = rows_table_id(event)
        if table_id not in self._tables:
            raise MalformedEvent(
                f"rows event at {self.file}:{self.pos} for table id {table_id} with no TABLE_MAP"
            )
        table = self._tables[table_id]
        if table is not None:
            self._rows.extend(decode_rows(event, tp, table))

    def _on_query(self, event: bytes, ts: int) -> SourceTxn | None:
        q = ev.parse_query(event, self._fde.post_header(ev.QUERY_EVENT) or 13)
        head = q.query.lstrip()[:20].upper()
        if head.startswith("BEGIN") or head.startswith("START TRANSACTION"):
            self._begin(True)
            return None
        if head.startswith("COMMIT"):
            return self._commit(ts)
        if head.startswith("ROLLBACK") and not head.startswith("ROLLBACK TO"):
            self._begin(False)
            commit = self._next(ts)
            return self._emit(Txn(commit, commit - 1))
        if self._in_txn:
            if not head.startswith(_SKIP_IN_TXN):
                log.warning("statement inside a transaction ignored: %.200s", q.query)
            return None
        target = ddlparse.classify(q.schema, q.query)
        commit = self._next(ts)
        if target is None:
            log.debug("not replicated (not schema DDL): %.200s", q.query)
            return self._emit(Txn(commit, commit - 1))
        self.schema.on_ddl(target.schema, target.table)
        self._tables.clear()
        txn = Txn(commit, commit - 1, ddl=Ddl(target.schema, q.query, target.table))
        return self._emit(self._filter.filter(txn))

    def _next(self, event_seconds: int) -> int:
        self.last_ts = next_ts(event_seconds, self.last_ts)
        return self.last_ts

    def _commit(self, ts: int) -> SourceTxn:
        commit = self._next(ts)
        txn = Txn(commit, commit - 1, tuple(self._rows))
        self._begin(False)
        return self._emit(txn)

    def _emit(self, txn: Txn) -> SourceTxn:
        return SourceTxn(txn, Position(self.file, self.pos, self.gtid))
