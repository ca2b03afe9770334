"""``PumpsClient``: what every binlog writer uses to reach the pump cluster
(TiDB's ``pump_client``, plus a batched write path).

Invariants:
- a P-binlog is acknowledged by at least one pump before ``write_binlog``
  returns, or ``write_binlog`` raises :class:`PumpClientError`;
- a C-binlog (commit/rollback) goes to the pump that acknowledged its
  P-binlog, and is retried there until ``commit_timeout``; it never raises
  (TiDB never fails a transaction for its C-binlog), failures are logged and
  counted;
- a C-binlog's copy for a pump that may hold its P-binlog unacknowledged is
  retried in the background until that pump takes it (``pumpclient.writes``);
- every background task (watch, probe, one batch sender per pump, those late
  C-binlog deliveries) is owned by the client's TaskGroup and ends with the
  client (a late delivery still pending then is logged as not delivered); a pump's channel is closed
  only after its batch sender has ended (on close or when the pump is
  removed), and callers of a batch aborted that way get an error.

Deviation from TiDB: a C-binlog whose prewrite pump is unknown (another
process wrote the prewrite, or its pump record is gone) is not dropped but
sent to every available pump. TiDB can drop it because its pump asks TiKV for
the commit status; our pumps cannot, and would roll the transaction back after
600 s, losing a committed transaction. A pump without the prewrite logs
"Matching P-binlog not found" and skips the copy.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, cast

from tributary.coord.kv import Kv
from tributary.pumpclient.batcher import DEFAULT_IN_FLIGHT, DEFAULT_MAX_BYTES, DEFAULT_MAX_COUNT
from tributary.pumpclient.clock import Clock, LoopClock
from tributary.pumpclient.codec import encode_binlog
from tributary.pumpclient.errors import PumpClientError
from tributary.pumpclient.membership import PumpSet
from tributary.pumpclient.pairing import Pairing
from tributary.pumpclient.pump import Pump
from tributary.pumpclient.selector import make_selector
from tributary.pumpclient.source import KvPumpSource, PumpSource, PumpSourceError
from tributary.pumpclient.stats import ClientStats
from tributary.pumpclient.transport import PumpTransport
from tributary.pumpclient.upkeep import follow_pumps, probe_loop, probe_unavailable
from tributary.pumpclient.writes import Writes
from tributary.registry.status import NodeStatus
from tributary.wire.binlog import Binlog, BinlogType
from tributary.wire.peek import BinlogHeader, MalformedBinlog, peek

log = logging.getLogger(__name__)

# betterproto's enum base is untyped here; these carry the precise type.
PREWRITE = BinlogType(BinlogType.Prewrite)
COMMIT = BinlogType(BinlogType.Commit)
ROLLBACK = BinlogType(BinlogType.Rollback)


class PumpsClient:
    """Use as ``async with PumpsClient(kv, cluster_id) as client:``.

    ``source`` is a :class:`~coord.kv.Kv` holding the pump records, or any
    :class:`~pumpclient.source.PumpSource`. Times are in seconds.
    ``ssl_context`` (a client context trusting the pumps' CA, with a client
    certificate if the pumps check one) turns on TLS; the client sets its
    ALPN protocol to ``h2``. ``stats``: the counters to add to (an owner that opens
    clients one after another passes the same one, so its totals only grow); default: the
    client's own.
    """

    def __init__(
        self,
        source: Kv | PumpSource,
        cluster_id: int,
        *,
        strategy: str = "range",
        write_timeout: float = 15.0,
        commit_timeout: float = 600.0,
        retry_interval: float = 0.1,
        probe_interval: float = 30.0,
        max_err_nums: int = 10,
        ssl_context: ssl.SSLContext | None = None,
        batch: bool = True,
        max_batch_count: int = DEFAULT_MAX_COUNT,
        max_batch_bytes: int = DEFAULT_MAX_BYTES,
        max_batches_in_flight: int = DEFAULT_IN_FLIGHT,
        clock: Clock | None = None,
        stats: ClientStats | None = None,
    ) -> None:
        self._source: PumpSource = (
            cast(PumpSource, source) if hasattr(source, "list_pumps") else KvPumpSource(source)
        )
        self.cluster_id = cluster_id
        self.stats = stats if stats is not None else ClientStats()
        self.batch = batch
        self._write_timeout = write_timeout
        self._retry_interval = retry_interval
        self._probe_interval = probe_interval
        if ssl_context is not None:
            ssl_context.set_alpn_protocols(["h2"])  # gRPC servers insist on it
        self._ssl = ssl_context
        self._max_batch_count = max_batch_count
        self._max_batch_bytes = max_batch_bytes
        self._max_batches_in_flight = max_batches_in_flight
        self._clock = clock or LoopClock()
        self.pumps = PumpSet(
            self._make_pump,
            make_selector(strategy),
            max_err_nums=max_err_nums,
            on_removed=self._on_removed,
        )
        self._writes = Writes(
            self.pumps,
            Pairing(),
            self.stats,
            self._clock,
            write_timeout=write_timeout,
            commit_timeout=commit_timeout,
            retry_interval=retry_interval,
            spawn=self._spawn,
        )
        self._tg: asyncio.TaskGroup | None = None
        self._background: list[asyncio.Task[None]] = []
        self._late: set[asyncio.Task[None]] = set()
        self._batch_tasks: dict[Pump, asyncio.Task[None]] = {}

    # -- lifecycle -----------------------------------------------------------

    async def __aenter__(self) -> Self:
        tg = asyncio.TaskGroup()
        await tg.__aenter__()
        self._tg = tg
        try:
            try:
                statuses = await self._source.list_pumps()
            except PumpSourceError as e:
                raise PumpClientError(f"list pumps: {e}") from e
            if not statuses:
                raise PumpClientError("no pump found")
            for status in statuses:
                self.pumps.upsert(status)
            follow = follow_pumps(self._source, self.pumps, self._clock, 10 * self._retry_interval)
            probe = probe_loop(self.pumps, self.stats, self._clock, self._probe_interval)
            self._background = [
                tg.create_task(follow, name="pumpclient-watch"),
                tg.create_task(probe, name="pumpclient-probe"),
            ]
        except BaseException as e:
            await self._close(type(e), e, e.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close(exc_type, exc, tb)

    async def _close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tg, self._tg = self._tg, None
        if tg is None:
            return
        for task in self._background:
            task.cancel()
        for task in self._late:
            log.warning("closing: %s not delivered", task.get_name())
            task.cancel()
        # Stops every batch sender; each channel closes once its sender ended.
        self.pumps.close()
        try:
            # Hand the group only a cancellation: any other exception belongs to
            # the caller's block and must not come back wrapped in an ExceptionGroup.
            if isinstance(exc, asyncio.CancelledError):
                await tg.__aexit__(exc_type, exc, tb)
            else:
                await tg.__aexit__(None, None, None)
        finally:
            self.pumps.close()  # a pump the watch added while it was stopping

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        if self._tg is None:
            coro.close()
            log.warning("closing: %s not delivered", name)
            return
        task = self._tg.create_task(coro, name=name)
        self._late.add(task)
        task.add_done_callback(self._late.discard)

    def _make_pump(self, status: NodeStatus) -> Pump:
        transport = PumpTransport(
            status.addr, self.cluster_id, self.stats, self._ssl, rpc_timeout=self._write_timeout
        )
        pump = Pump(
            status,
            transport,
            batch=self.batch,
            max_batch_count=self._max_batch_count,
            max_batch_bytes=self._max_batch_bytes,
            max_batches_in_flight=self._max_batches_in_flight,
        )
        if pump.batcher is not None and self._tg is not None:
            self._batch_tasks[pump] = self._tg.create_task(
                pump.batcher.run(), name=f"pumpclient-batch-{status.node_id}"
            )
        return pump

    def _on_removed(self, pump: Pump) -> None:
        """Stop the pump's batch sender, aborting its batch in flight, and close
        the channel only once the sender has ended: closing it in the same step
        would turn the sender's cancellation into an RPC error (see
        :mod:`pumpclient.batcher`). Callers of the aborted batch get an error."""
        if pump.batcher is not None:
            pump.batcher.stop()
        task = self._batch_tasks.pop(pump, None)
        if task is None or task.done():
            pump.transport.close()
            return
        task.cancel()
        task.add_done_callback(lambda _: pump.transport.close())

    async def probe_unavailable(self) -> None:
        """Probe every online pump in the unavailable set now; those that
        answer become available again (the client does this every
        ``probe_interval``)."""
        await probe_unavailable(self.pumps, self.stats)

    # -- writes --------------------------------------------------------------

    async def write_binlog(self, binlog: Binlog | bytes) -> None:
        """Write one binlog: a ``wire.binlog.Binlog`` or its marshalled bytes.

        P-binlogs raise :class:`PumpClientError` when no pump stored them;
        commit/rollback binlogs never raise (see the module docstring).
        """
        if isinstance(binlog, bytes | bytearray | memoryview):
            payload = bytes(binlog)
            try:
                header = peek(payload)
            except MalformedBinlog as e:
                raise PumpClientError(f"malformed binlog: {e}", retriable=False) from e
        else:
            header = BinlogHeader(
                BinlogType(binlog.tp), binlog.start_ts, binlog.commit_ts, binlog.ddl_job_id
            )
            payload = encode_binlog(
                int(binlog.tp),
                binlog.start_ts,
                binlog.commit_ts,
                prewrite_key=binlog.prewrite_key,
                prewrite_value=binlog.prewrite_value,
                ddl_query=binlog.ddl_query,
                ddl_job_id=binlog.ddl_job_id,
                ddl_schema_state=binlog.ddl_schema_state,
            )
        await self._write(payload, header)

    async def prewrite(
        self,
        start_ts: int,
        prewrite_value: bytes,
        prewrite_key: bytes = b"",
        ddl_query: bytes = b"",
        ddl_job_id: int = 0,
    ) -> None:
        payload = encode_binlog(
            PREWRITE,
            start_ts,
            prewrite_key=prewrite_key,
            prewrite_value=prewrite_value,
            ddl_query=ddl_query,
            ddl_job_id=ddl_job_id,
        )
        await self._write(payload, BinlogHeader(PREWRITE, start_ts, 0, ddl_job_id))

    async def commit(self, start_ts: int, commit_ts: int) -> None:
        payload = encode_binlog(COMMIT, start_ts, commit_ts)
        await self._write(payload, BinlogHeader(COMMIT, start_ts, commit_ts, 0))

    async def rollback(self, start_ts: int) -> None:
        payload = encode_binlog(ROLLBACK, start_ts)
        await self._write(payload, BinlogHeader(ROLLBACK, start_ts, 0, 0))

    @property
    def pending_commits(self) -> int:
        """Transactions whose P-binlog was written and whose C-binlog was not."""
        return self._writes.pending_pairs

    async def _write(self, payload: bytes, header: BinlogHeader) -> None:
        if self._tg is None:
            raise PumpClientError("pump client is not running", retriable=False)
        if header.tp == PREWRITE:
            await self._writes.prewrite(payload, header.start_ts)
        elif header.tp in (COMMIT, ROLLBACK):
            await self._writes.commit(payload, header.start_ts)
        else:
            raise PumpClientError(f"unsupported binlog type {header.tp.name}", retriable=False)
