"""A pump front process: serves the pump's port beside its siblings (``SO_REUSEPORT``).

It answers ``binlog.Pump/WriteBinlog`` and ``binlogext.PumpBatch/WriteBinlogs`` itself: reads
the request, checks the cluster ID, validates each binlog (size, wire structure) and hands the
valid ones to the storage writer over the front link (``split.link``), answering once the
writer acknowledged them durable. Their durations go to the writer's ``/metrics`` over the same
link (``split.observations``). Every other RPC and the HTTP API are relayed to the writer
process (``split.proxy``). Started by the writer process (``split.fronts``) with its
``FrontSpec`` in the environment; ``python -m services.pump.split.front``.

Exit: SIGTERM stops accepting, lets running calls finish (5 s), exits 0. If the link to the
writer breaks, pending writes fail as retriable (UNAVAILABLE) and the front exits 1: a front
cannot store anything without its writer, and the pump restarts as a whole. It also dies with
its parent (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import uvloop
from grpclib.const import Cardinality, Handler

from services.pump.api import PumpApi, PumpBatchApi
from services.pump.intake import WriteRefused, store_validated, validate
from services.pump.metrics import RPC_BUCKETS
from services.pump.pullwire import PumpCodec
from services.pump.split.link import WriterLink
from services.pump.split.local import LocalChannel
from services.pump.split.observations import SHIP_INTERVAL, FrontObservations, ship_every
from services.pump.split.proxy import RelayedRpc, http_splice
from tributary.servicekit.gctune import relax_gc
from tributary.servicekit.grpcserver import grpc_server
from tributary.servicekit.net import bind
from tributary.settings.logs import LogSettings
from tributary.settings.security import SecuritySettings
from tributary.telemetry import configure_logging_from
from tributary.telemetry.grpcauth import enforce_allowed_cn
from tributary.telemetry.oneport import share_port
from tributary.telemetry.tls import ALPN_ONE_PORT, server_context

log = logging.getLogger(__name__)

SPEC_ENV = "TRIBUTARY_PUMP_FRONT"
GRACE = 5.0  # seconds running calls get after SIGTERM
LOCAL = ("/binlog.Pump/WriteBinlog", "/binlogext.PumpBatch/WriteBinlogs")
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class FrontSpec:
    """What a front is told by the writer process that starts it."""

    addr: str  # host:port, the pump's bound port
    writer: str  # local names of the writer's front link, gRPC and HTTP servers
    grpc: str
    http: str
    cluster_id: int
    max_message_size: int
    methods: dict[str, str]  # every RPC the writer serves: path -> grpclib Cardinality name
    security: SecuritySettings
    log: LogSettings
    parent: int

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> FrontSpec:
        raw: dict[str, Any] = json.loads(text)
        sec = raw.pop("security")
        sec["cert_allowed_cn"] = tuple(sec["cert_allowed_cn"])
        return cls(security=SecuritySettings(**sec), log=LogSettings(**raw.pop("log")), **raw)


class FrontWrites:
    """The write RPCs' intake in a front: validate here, store in the writer."""

    def __init__(self, link: WriterLink, max_message_size: int) -> None:
        self._link = link
        self._max = max_message_size

    async def write(self, payload: bytes) -> None:
        item = validate(payload, self._max)
        if item is None:
            return
        (refused,) = await self._link.store([item])
        if refused is not None:
            raise refused

    async def write_many(self, payloads: Sequence[bytes]) -> list[WriteRefused | None]:
        return await store_validated(self._max, payloads, self._link.store)


class _Handlers:
    def __init__(self, mapping: dict[str, Handler]) -> None:
        self._mapping = mapping

    def __mapping__(self) -> dict[str, Handler]:
        return self._mapping


def _die_with_parent(parent: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the broken link still ends the front
    if os.getppid() != parent:  # the parent died before we could ask
        sys.exit(f"pump front {os.getpid()}: its writer process {parent} is gone; exiting")


async def run_front(spec: FrontSpec) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    link = await WriterLink.connect(spec.writer)
    channel = LocalChannel(spec.grpc)
    writes = FrontWrites(link, spec.max_message_size)
    observations = FrontObservations(RPC_BUCKETS)
    local = PumpApi(spec.cluster_id, writes, _NoPulls(), observations.observe).__mapping__()
    local.update(PumpBatchApi(spec.cluster_id, writes).__mapping__())
    relayed = {p: Cardinality[c] for p, c in spec.methods.items() if p not in LOCAL}
    server = grpc_server(
        [_Handlers({p: local[p] for p in LOCAL}), RelayedRpc(channel, relayed)],
        codec=PumpCodec(),
    )
    enforce_allowed_cn(server, spec.security.cert_allowed_cn)
    share_port(server, http_splice(spec.http, spec.security.cert_allowed_cn))
    sock = bind(spec.addr, reuse_port=True)
    await server.start(sock=sock, ssl=server_context(spec.security, alpn=ALPN_ONE_PORT))
    link.hello()
    shipping = asyncio.create_task(
        ship_every(SHIP_INTERVAL, observations, link.send_observed), name="pump-front-observed"
    )
    stopped = asyncio.ensure_future(stop.wait())
    lost = asyncio.ensure_future(link.lost.wait())
    await asyncio.wait({stopped, lost}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    lost.cancel()
    code = 0 if stop.is_set() else 1
    if code:
        log.error("front %d lost its storage writer; exiting", os.getpid())
    server.close()
    try:
        async with asyncio.timeout(GRACE):
            await server.wait_closed()
    except TimeoutError:
        log.warning("front %d: calls did not finish within %.0f s", os.getpid(), GRACE)
    shipping.cancel()
    link.send_observed(observations.take())  # the calls answered since the last shipment
    await link.close()
    channel.close()
    return code


class _NoPulls:
    """A front never serves PullBinlogs itself: it is relayed to the writer."""

    def pull_batches(self, after_ts: int) -> Any:
        raise NotImplementedError


def main() -> int:
    spec = FrontSpec.from_json(os.environ[SPEC_ENV])
    _die_with_parent(spec.parent)
    configure_logging_from(spec.log)
    relax_gc()
    return uvloop.run(run_front(spec))


if __name__ == "__main__":
    sys.exit(main())
