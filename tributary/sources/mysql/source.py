"""The MySQL/MariaDB change source: ``open_source(cfg, start, last_ts)`` yields an async
iterator of whole transactions after ``start``, forever (it follows the binlog as it grows).

At open it checks the server (``server.inspect``: ROW binlog with FULL row image and FULL row
metadata), loads its collations, then starts a binlog dump at ``start``. No schema is loaded
or stored: every transaction's TABLE_MAPs describe its tables (``schema``), so a resume from
any ``SourceTxn.position`` with that transaction's ``commit_ts`` as ``last_ts`` yields the
same following transactions with the same timestamps (``timestamps``).

With ``cfg.resolve_idle`` the stream also yields resolved-ts markers while the upstream is idle
(``resolved``: ``SourceTxn.resolved`` is set, the txn is empty and its ts is safe).

Errors are ``SourceError``: a lost or killed connection is retriable (reopen from the last
position you kept); a misconfigured server or an event we cannot read is not.
"""

from __future__ import annotations

import collections
import logging
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tributary.change import DEFAULT_IGNORE_DBS, TableFilter, Txn
from tributary.sources.mysql import server
from tributary.sources.mysql.assemble import Assembler, SourceTxn
from tributary.sources.mysql.config import SourceConfig
from tributary.sources.mysql.dump import BinlogDump
from tributary.sources.mysql.errors import MalformedEvent, SourceError
from tributary.sources.mysql.position import Position
from tributary.sources.mysql.resolved import UpstreamClock, reached
from tributary.sources.mysql.schema import SchemaTracker
from tributary.sources.mysql.temporal import zone

log = logging.getLogger(__name__)


class TxnStream:
    """The transactions of an open dump, in binlog order (an async iterator); with a clock,
    resolved-ts markers in between while the reader is caught up (``resolved``)."""

    def __init__(
        self, dump: BinlogDump, assembler: Assembler, clock: UpstreamClock | None = None
    ) -> None:
        self._dump = dump
        self._assembler = assembler
        self._clock = clock
        self._ready: collections.deque[SourceTxn] = collections.deque()

    @property
    def events(self) -> int:
        """Events read so far."""
        return self._assembler.events

    def __aiter__(self) -> TxnStream:
        return self

    async def __anext__(self) -> SourceTxn:
        ready = self._ready
        while not ready:
            raws = await self._dump.read_events()
            feed = self._assembler.feed
            try:
                for raw in raws:
                    txn = feed(raw)
                    if txn is not None:
                        ready.append(txn)
            except SourceError:
                raise
            except (IndexError, ValueError, struct.error) as e:
                a = self._assembler
                raise MalformedEvent(f"cannot read the event after {a.file}:{a.pos}: {e!r}") from e
            if not ready and self._assembler.heard is not None:
                marker = await self._resolve()
                if marker is not None:
                    ready.append(marker)
        return ready.popleft()

    async def _resolve(self) -> SourceTxn | None:
        """A resolved-ts marker after a heartbeat, when the upstream's snapshot allows one."""
        a = self._assembler
        heard, a.heard = a.heard, None
        if self._clock is None or heard is None or a.in_txn:
            return None
        snap = await self._clock.snapshot()
        if snap is None:
            return None
        at = a.position
        if not (reached(at, snap.end) or reached(heard, snap.end)):
            return None  # written meanwhile: the transactions will move the ts
        ts = snap.resolved_ts
        if ts <= a.last_ts:
            return None
        a.last_ts = ts
        return SourceTxn(Txn(ts, ts - 1), at, resolved=True)


def default_filter() -> TableFilter:
    """What replicates when no filter is given: everything but the system databases."""
    return TableFilter(ignore_dbs=DEFAULT_IGNORE_DBS)


async def list_tables(cfg: SourceConfig) -> list[tuple[str, str]]:
    """The upstream's base tables, ``(schema, table)``, those the source's filter passes."""
    flt = cfg.filter or default_filter()
    return [(d, t) for d, t in await server.list_tables(cfg) if flt.allows(d, t)]


async def current_position(cfg: SourceConfig) -> Position:
    """The end of the binlog now: a source opened there reads only what is written later."""
    return await server.current_position(cfg)


@asynccontextmanager
async def open_source(
    cfg: SourceConfig, start: Position, last_ts: int = 0
) -> AsyncIterator[AsyncIterator[SourceTxn]]:
    """The transactions after ``start``; ``last_ts`` is the ts of the one ending at ``start``."""
    info = await server.inspect(cfg)
    try:
        tz = zone(cfg.tz)
    except (ValueError, KeyError) as e:
        raise SourceError(f"unknown time zone {cfg.tz!r}") from e
    schema = SchemaTracker(info.charsets, tz)
    assembler = Assembler(
        start, last_ts, schema, cfg.filter or default_filter(), checksum=info.checksum
    )
    dump = await BinlogDump.open(
        cfg.host,
        cfg.port,
        cfg.user,
        cfg.password,
        server_id=cfg.server_id,
        start=start,
        heartbeat=cfg.heartbeat,
    )
    clock = UpstreamClock(cfg) if cfg.resolve_idle else None
    try:
        yield TxnStream(dump, assembler, clock)
    finally:
        if clock is not None:
            clock.close()
        await dump.close()
