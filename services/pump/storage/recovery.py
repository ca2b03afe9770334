"""Restart catch-up: index and sort again what a crash may have left undone.

The index may lag the value log (killed between fdatasync and the index
commit) and the sorter's state is only in memory. Both are rebuilt from the
value log after ``min(headPointer, handlePointer)``: every record there is
put in the index again (idempotent: same key, same position) and pushed to
the sorter again, in value-log order.

Invariant: after :func:`catch_up` every good record in the value log is
indexed, and the sorter holds exactly the items whose pairing was not yet
settled before the crash (items it already finished can only repeat commits
at or below the persisted max, which do not move it).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from services.pump.sorter import ItemKind, Sorter, SortItem
from services.pump.storage.index import Index, IndexRow
from services.pump.storage.segment import Pointer
from services.pump.storage.vlog import ValueLog
from services.pump.storage.writer import index_row
from tributary.wire.binlog import BinlogType
from tributary.wire.peek import BinlogHeader, MalformedBinlog, peek

log = logging.getLogger(__name__)

CATCH_UP_BYTES = 4 << 20  # value-log bytes read per step


_PREWRITE, _COMMIT, _ROLLBACK = BinlogType.Prewrite, BinlogType.Commit, BinlogType.Rollback
_P, _C, _R = ItemKind.PREWRITE, ItemKind.COMMIT, ItemKind.ROLLBACK


def sort_item(header: BinlogHeader, end: Pointer) -> SortItem | None:
    """The sorter's view of a stored binlog (``end``: the position just after it)."""
    tp = header.tp
    if tp == _PREWRITE:
        return SortItem(_P, header.start_ts, 0, end)
    if tp == _COMMIT or header.is_fake:
        return SortItem(_C, header.start_ts, header.commit_ts, end)
    if tp == _ROLLBACK:
        return SortItem(_R, header.start_ts, 0, end)
    return None  # PreDDL/PostDDL: obsolete, nothing to pair


async def catch_up(
    vlog: ValueLog, index: Index, sorter: Sorter, start: Pointer, executor: Executor
) -> int:
    """Index and sort every record from ``start`` on; how many records were replayed."""
    loop = asyncio.get_running_loop()
    pos: Pointer | None = start
    replayed = 0
    while pos is not None:
        records, pos = await loop.run_in_executor(executor, vlog.scan_from, pos, CATCH_UP_BYTES)
        if not records:
            continue
        rows: list[IndexRow] = []
        items: list[SortItem] = []
        for rec in records:
            try:
                header = peek(rec.payload)
            except MalformedBinlog as e:
                log.error("value log %06d@%d: not a binlog (%s); skipped", rec.fid, rec.offset, e)
                continue
            row = index_row(header, rec.fid, rec.offset, rec.size)
            if row is not None:
                rows.append(row)
            item = sort_item(header, Pointer(rec.fid, rec.offset + rec.size))
            if item is not None:
                items.append(item)
        last = records[-1]
        await index.put_batch(rows, Pointer(last.fid, last.offset + last.size))
        sorter.push_many(items)
        replayed += len(records)
    if replayed:
        log.info("replayed %d value-log records from %06d@%d", replayed, start.fid, start.offset)
    return replayed
