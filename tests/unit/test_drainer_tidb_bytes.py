"""The drainer on binlogs and DDL jobs exactly as a real tidb-server wrote them through our pumps
(tests/data/tidb-server/, captured from tests/integration/test_tidb_server.py's pipeline)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from services.drainer.item import PulledBinlogItem
from services.drainer.schema import SchemaTracker
from services.drainer.translate import to_txn
from tributary.change import RowKind, Txn
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import DdlHistory, DdlJob, KvDdlHistory
from tributary.ddlhistory.jobjson import job_from_json

DATA = Path(__file__).resolve().parents[1] / "data" / "tidb-server"


class LateHistory:
    """A history that shows the jobs in ``hidden`` only once one is asked for by id (its DDL
    binlog is read): TiDB puts a job into its history after writing the job's binlog, and a
    drainer that reads rows of the job's version before that does not find it yet."""

    def __init__(self, inner: DdlHistory, hidden: set[int]) -> None:
        self.inner = inner
        self.hidden = hidden

    async def get_job(self, job_id: int) -> DdlJob | None:
        self.hidden.discard(job_id)
        return await self.inner.get_job(job_id)

    async def put_job(self, job: DdlJob) -> None:
        await self.inner.put_job(job)

    async def jobs_since(self, schema_version: int) -> list[DdlJob]:
        jobs = await self.inner.jobs_since(schema_version)
        return [j for j in jobs if j.id not in self.hidden]


async def translated(name: str, *, hidden: Iterable[int] = ()) -> list[Txn]:
    """Every binlog of the capture ``name``, through one tracker, in commit ts order; the jobs
    ``hidden`` come into the history with their binlogs (``LateHistory``)."""
    capture: dict[str, Any] = json.loads((DATA / name).read_text())
    kv_history = KvDdlHistory(MemoryKv())
    for doc in capture["history"]:
        await kv_history.put_job(job_from_json(doc))
    history = LateHistory(kv_history, set(hidden))
    schema = SchemaTracker()
    return [
        await to_txn(
            PulledBinlogItem(b["commit_ts"], b["start_ts"], bytes.fromhex(b["payload"]), False),
            schema,
            history,
        )
        for b in capture["binlogs"]
    ]


async def test_late_transactions_are_named_as_the_table_is_after_the_ddl() -> None:
    # TiDB's metadata lock let two transactions commit after the binlog of a DDL that renamed
    # what they wrote: the downstream has run the DDL by then, so their rows, decoded with the
    # table of their own schema version, carry the names it has now.
    txns = await translated("late-transactions.json")
    ddl = [t.ddl.query for t in txns if t.ddl is not None]
    assert ddl[-2:] == [
        "ALTER TABLE `late`.`t` CHANGE COLUMN `b` `c` VARCHAR(10);",
        "RENAME TABLE `late`.`t` TO `late`.`u`;",
    ]
    first, late_change, late_rename = (t for t in txns if t.rows)
    assert late_change.schema_version == first.schema_version == 43
    assert [(r.kind, r.table.qualified, dict(r.values)) for r in first.rows] == [
        (RowKind.INSERT, "late.t", {"id": 1, "a": 1, "b": "one"}),
    ]
    assert [(r.kind, r.table.qualified, dict(r.values)) for r in late_change.rows] == [
        (RowKind.INSERT, "late.t", {"id": 2, "a": 2, "c": "two"}),
        (RowKind.UPDATE, "late.t", {"id": 1, "a": 1, "c": "uno"}),
    ]
    assert dict(late_change.rows[1].old_values or {}) == {"id": 1, "a": 1, "c": "one"}
    assert late_change.rows[0].table.primary_key == ("id",)
    assert late_rename.schema_version == 44
    assert [(r.table.qualified, dict(r.values)) for r in late_rename.rows] == [
        ("late.u", {"id": 3, "a": 3, "c": "three"}),
    ]


@pytest.mark.parametrize("in_history", [True, False], ids=["job-in-history", "job-not-yet"])
async def test_rows_a_multi_schema_change_shows_before_its_binlog_wait_for_its_columns(
    in_history: bool,
) -> None:
    # ALTER TABLE m.w ADD COLUMN m1 ..., ADD COLUMN m2 ..., ADD INDEX im (k): TiDB makes the
    # columns public at the job's final schema version (56) before it writes the job's binlog,
    # so rows of version 56 come first; the downstream has no m1 and m2 until the DDL runs.
    # The job may be in TiDB's history already when they are read, or not yet: then the job's
    # own binlog applies it, though rows of its version were read before.
    txns = await translated("multi-schema-change.json", hidden=() if in_history else (88,))
    ddl_at = next(i for i, t in enumerate(txns) if t.ddl is not None and "m1" in t.ddl.query)
    early = [t for t in txns[:ddl_at] if t.rows and t.schema_version == 56]
    assert len(early) == 3
    for t in early:
        (row,) = t.rows
        assert row.table.column_names == ("id", "k", "v")
        assert set(row.values) == {"id", "k", "v"}
    after = txns[ddl_at + 1]
    assert after.schema_version == 56
    assert after.rows[0].table.column_names == ("id", "k", "v", "m1", "m2")
    assert dict(after.rows[0].values) | {"id": 0, "k": 0} == {
        "id": 0, "k": 0, "v": "x", "m1": 1, "m2": "2020-01-01 00:00:00",
    }  # fmt: skip


async def test_a_table_first_written_after_a_ddl_is_read_as_the_ddl_left_it() -> None:
    # A transaction's binlog carries the schema version of its start; a table it first
    # writes after a DDL is written with the table as the DDL left it (TiDB's metadata lock
    # takes the newest version of a table not touched yet): after TRUNCATE, a table id that
    # did not exist at that version; after ADD COLUMN, a row holding the new column.
    txns = await translated("first-write-after-ddl.json")
    rows = [(t.schema_version, r.table.qualified, dict(r.values)) for t in txns for r in t.rows]
    assert rows == [
        (44, "fa.t", {"id": 1, "v": "before"}),
        (44, "fa.t", {"id": 2, "v": "after tr"}),  # table id 90: created at version 45
        (45, "fa.u", {"id": 1, "v": "added", "c": 5}),  # c: added at version 49
        (50, "fa.u", {"id": 2, "v": "later", "c": 9}),
    ]
    added = next(r for t in txns for r in t.rows if r.values.get("c") == 5)
    assert added.table.column_names == ("id", "v", "c")
