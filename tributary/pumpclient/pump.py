"""One known pump as the client sees it: its etcd record, its error count and
its connection (batched or unary).

Invariant: ``err_num`` counts consecutive failed RPCs (reset by any success);
a pump is *usable* only while its record says online and ``err_num`` is at
most ``max_err_nums``, as in TiDB's pump client.
"""

from __future__ import annotations

from collections.abc import Sequence

from tributary.pumpclient.batcher import (
    DEFAULT_IN_FLIGHT,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_COUNT,
    Batcher,
)
from tributary.pumpclient.errors import RpcFailure
from tributary.pumpclient.transport import BatchRejected, PumpTransport
from tributary.registry.status import NodeState, NodeStatus


class Pump:
    def __init__(
        self,
        status: NodeStatus,
        transport: PumpTransport,
        *,
        batch: bool,
        max_batch_count: int = DEFAULT_MAX_COUNT,
        max_batch_bytes: int = DEFAULT_MAX_BYTES,
        max_batches_in_flight: int = DEFAULT_IN_FLIGHT,
    ) -> None:
        self.status = status
        self.transport = transport
        self.err_num = 0
        self.batcher: Batcher | None = None
        if batch:
            # A queued write waits at most one RPC timeout to be sent, then its own RPC's.
            self.batcher = Batcher(
                self._send_batch,
                max_count=max_batch_count,
                max_bytes=max_batch_bytes,
                max_in_flight=max_batches_in_flight,
                queue_timeout=transport.rpc_timeout,
            )

    @property
    def node_id(self) -> str:
        return self.status.node_id

    @property
    def should_be_usable(self) -> bool:
        return self.status.state is NodeState.ONLINE

    def usable(self, max_err_nums: int) -> bool:
        return self.should_be_usable and self.err_num <= max_err_nums

    async def _send_batch(self, payloads: Sequence[bytes]) -> list[RpcFailure | None]:
        return await self.transport.write_many(payloads)

    async def write(self, payload: bytes) -> None:
        """Store one binlog on this pump or raise :class:`RpcFailure`; counts
        the outcome in ``err_num``."""
        try:
            await self._write(payload)
        except RpcFailure:
            self.err_num += 1
            raise
        self.err_num = 0

    async def _write(self, payload: bytes) -> None:
        if self.batcher is not None and self.transport.batch_supported:
            try:
                await self.batcher.submit(payload)
                return
            except BatchRejected:
                pass  # the pump takes it unary only: fall through
        await self.transport.write_one(payload)

    async def probe(self) -> None:
        """An empty WriteBinlog (start_ts = commit_ts = 0), which a healthy
        pump accepts as a no-op; raises :class:`RpcFailure`."""
        await self.write_unary(b"")

    async def write_unary(self, payload: bytes) -> None:
        try:
            await self.transport.write_one(payload)
        except RpcFailure:
            self.err_num += 1
            raise
        self.err_num = 0
