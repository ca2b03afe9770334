"""Counters in etcd for DDL writers: job ids, schema versions and table (global) ids.

Each counter is one key under ``/tidb-binlog/v1/ddl-history/meta/`` holding the last value
handed out, in decimal. Invariant: a value is handed out at most once, across processes:
allocation is a compare-and-swap on the key's mod revision (on "absent" for the first one),
retried when another writer won the race. Counters start at 1 (job id 0 means "no DDL").
Example: two writers read ``schema-version = 7``; both try to put 8 guarded by the revision
they read; one txn succeeds and returns 8, the other fails, re-reads 8 and returns 9.
"""

from __future__ import annotations

import enum
import logging

from tributary.coord.kv import Compare, CompareOp, Kv, KvError, Put
from tributary.ddlhistory.errors import DdlHistoryError

log = logging.getLogger(__name__)

META_PREFIX = b"/tidb-binlog/v1/ddl-history/meta/"


class Counter(enum.Enum):
    JOB_ID = "job-id"
    SCHEMA_VERSION = "schema-version"
    TABLE_ID = "table-id"  # TiDB's global id: databases and tables draw from it too

    @property
    def key(self) -> bytes:
        return META_PREFIX + self.value.encode()


async def read_counter(kv: Kv, counter: Counter) -> tuple[int, Compare]:
    """The counter's last value (0 when never used) and a txn guard: "it is still that"."""
    item = await kv.get(counter.key)
    if item is None:
        return 0, Compare(counter.key, CompareOp.VERSION_EQUAL, 0)
    try:
        value = int(item.value)
    except ValueError as e:
        raise DdlHistoryError(f"counter {counter.value} holds {item.value!r}") from e
    return value, Compare(counter.key, CompareOp.MOD_REVISION_EQUAL, item.mod_revision)


class KvIdAllocator:
    def __init__(self, kv: Kv, *, attempts: int = 100) -> None:
        self._kv = kv
        self._attempts = attempts

    async def current(self, counter: Counter) -> int:
        """The last value handed out (0 if none)."""
        try:
            value, _ = await read_counter(self._kv, counter)
        except KvError as e:
            raise DdlHistoryError(f"reading {counter.value}: {e}", retriable=e.retriable) from e
        return value

    async def allocate(self, counter: Counter, count: int = 1) -> int:
        """Reserve ``count`` consecutive values; returns the first."""
        if count < 1:
            raise ValueError(f"count must be positive, got {count}")
        try:
            for _ in range(self._attempts):
                last, guard = await read_counter(self._kv, counter)
                put = Put(counter.key, str(last + count).encode())
                if (await self._kv.txn([guard], [put])).succeeded:
                    return last + 1
                log.debug("counter %s moved under us, retrying", counter.value)
        except KvError as e:
            raise DdlHistoryError(f"allocating {counter.value}: {e}", retriable=e.retriable) from e
        raise DdlHistoryError(f"counter {counter.value}: too much contention", retriable=True)

    async def next_job_id(self) -> int:
        return await self.allocate(Counter.JOB_ID)

    async def next_schema_version(self) -> int:
        return await self.allocate(Counter.SCHEMA_VERSION)

    async def next_table_id(self) -> int:
        return await self.allocate(Counter.TABLE_ID)
