"""gRPC edge of the drainer: ``binlog.Cistern`` (tipb wire).

``Notify`` is what a joining pump calls on every online drainer before it
serves: the pump records are listed and applied *before* the reply, so the
new pump is in the merge before it takes its first write. ``DumpBinlog`` and
``DumpDDLJobs`` are stubs in tidb-binlog too; here they answer UNIMPLEMENTED.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from services.drainer.errors import CollectorStopped
from tributary.coord.kv import KvError
from tributary.wire.binlog import (
    CisternBase,
    DumpBinlogReq,
    DumpBinlogResp,
    DumpDdlJobsReq,
    DumpDdlJobsResp,
    NotifyReq,
    NotifyResp,
)

log = logging.getLogger(__name__)


class CisternApi(CisternBase):
    def __init__(self, refresh_pumps: Callable[[], Awaitable[None]]) -> None:
        self._refresh = refresh_pumps

    async def notify(self, notify_req: NotifyReq) -> NotifyResp:
        log.info("notified by a joining pump; refreshing pumps")
        try:
            await self._refresh()
        except CollectorStopped as e:
            raise GRPCError(Status.UNAVAILABLE, f"drainer is not collecting pumps: {e}") from e
        except KvError as e:
            raise GRPCError(Status.UNAVAILABLE, f"cannot list pumps in etcd: {e}") from e
        return NotifyResp()

    async def dump_binlog(self, dump_binlog_req: DumpBinlogReq) -> AsyncIterator[DumpBinlogResp]:
        raise GRPCError(
            Status.UNIMPLEMENTED,
            "DumpBinlog is not supported by this drainer (a stub in tidb-binlog as well)",
        )
        yield DumpBinlogResp()  # pragma: no cover - makes this an async generator

    async def dump_ddl_jobs(self, dump_ddl_jobs_req: DumpDdlJobsReq) -> DumpDdlJobsResp:
        raise GRPCError(
            Status.UNIMPLEMENTED,
            "DumpDDLJobs is not supported by this drainer (a stub in tidb-binlog as well)",
        )
