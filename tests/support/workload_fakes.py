"""Fakes of the workload's ports (the TSO and the binlog writer) that log every call into one event
list, and the two-column table the workload tests write."""

from __future__ import annotations

import asyncio
from typing import Any

from tributary.pumpclient import PumpClientError
from tributary.tso.errors import TsoError
from tributary.workload import columns

SPEC = columns.TableSpec(
    "t",
    (columns.bigint("id", not_null=True), columns.bigint("v", not_null=True)),
    primary_key=("id",),
)


Events = list[tuple[Any, ...]]


class LoggingTso:
    def __init__(self, events: Events) -> None:
        self.events = events
        self.last = 1000
        self.failures = 0  # the next calls that fail

    async def get_ts(self) -> int:
        await asyncio.sleep(0)
        if self.failures:
            self.failures -= 1
            self.events.append(("ts-failed",))
            raise TsoError("TSO unreachable", retriable=True)
        self.last += 1
        self.events.append(("ts", self.last))
        return self.last


class LoggingWriter:
    def __init__(self, events: Events) -> None:
        self.events = events
        self.values: dict[int, bytes] = {}
        self.prewrite_error: PumpClientError | None = None

    async def prewrite(
        self,
        start_ts: int,
        prewrite_value: bytes,
        prewrite_key: bytes = b"",
        ddl_query: bytes = b"",
        ddl_job_id: int = 0,
    ) -> None:
        await asyncio.sleep(0)
        if self.prewrite_error is not None:
            raise self.prewrite_error
        self.values[start_ts] = prewrite_value
        self.events.append(("prewrite", start_ts, ddl_job_id, ddl_query))

    async def commit(self, start_ts: int, commit_ts: int) -> None:
        self.events.append(("commit", start_ts, commit_ts))

    async def rollback(self, start_ts: int) -> None:
        self.events.append(("rollback", start_ts))
