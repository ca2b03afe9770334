"""Builders of marshalled binlogs and storage write items for pump storage tests."""

from __future__ import annotations

from services.pump.storage import WriteItem
from tributary.wire.binlog import Binlog, BinlogType, PrewriteValue, TableMutation
from tributary.wire.peek import peek
from tributary.wire.ts import compose

PREWRITE = BinlogType(BinlogType.Prewrite)
COMMIT = BinlogType(BinlogType.Commit)
ROLLBACK = BinlogType(BinlogType.Rollback)


def item(payload: bytes) -> WriteItem:
    return WriteItem(payload, peek(payload))


def prewrite(start_ts: int, value: bytes = b"", ddl_job_id: int = 0) -> WriteItem:
    pv = bytes(
        PrewriteValue(
            schema_version=1,
            mutations=[TableMutation(table_id=7, inserted_rows=[value or b"row%d" % start_ts])],
        )
    )
    return item(
        bytes(
            Binlog(
                tp=PREWRITE,
                start_ts=start_ts,
                prewrite_key=b"k%d" % start_ts,
                prewrite_value=pv,
                ddl_query=b"create table t (a int)" if ddl_job_id else b"",
                ddl_job_id=ddl_job_id,
            )
        )
    )


def commit(start_ts: int, commit_ts: int) -> WriteItem:
    return item(bytes(Binlog(tp=COMMIT, start_ts=start_ts, commit_ts=commit_ts)))


def rollback(start_ts: int) -> WriteItem:
    return item(bytes(Binlog(tp=ROLLBACK, start_ts=start_ts)))


def fake(ts: int) -> WriteItem:
    return item(bytes(Binlog(tp=ROLLBACK, start_ts=ts, commit_ts=ts)))


BASE_MS = 1_700_000_000_000  # physical time of ts(0, 0) in these tests


def ts(seconds: float, logical: int = 0) -> int:
    """A TSO timestamp ``seconds`` after the test epoch."""
    return compose(BASE_MS + int(seconds * 1000), logical)


class Clock:
    """The latest TSO ts the storage sees (for txn timeouts); tests move it by hand."""

    def __init__(self, now: int | None = None) -> None:
        self.now = ts(0) if now is None else now

    def __call__(self) -> int:
        return self.now
