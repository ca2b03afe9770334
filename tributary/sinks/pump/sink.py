"""The ``pump://`` sink: whole transactions written into a pump cluster the way TiDB does.

``pump://ETCD_HOST:PORT[,HOST:PORT...]/?name=X[&cluster-id=N][&ssl-ca=..&ssl-cert=..&ssl-key=..]``
(``name`` required: it keys the checkpoint; ``cluster-id`` defaults to the one in etcd; the
``ssl-*`` files secure the gRPC calls to the pumps and the TSO). Changes read by the capture
cluster flow into the pumps and out through any drainer: each transaction is a P-binlog of
TiDB-codec rows and a C-binlog (``write``), each table is registered in the etcd DDL history
and each DDL is a job plus a DDL binlog (``catalog``).

Checkpoint: the commit ts (of the Txn, the upstream's) of the last transaction of the last batch
whose C-binlogs were all acknowledged, at ``/tributary/pump-sink/<name>/checkpoint`` in etcd
(decimal text), written after each batch; a restarted sink drops what is at or below it.
Delivery into the pumps is at-least-once: a crash between the C-binlogs and the checkpoint
write replays that batch as new transactions, which the drainer's safe mode makes harmless.
``safe_mode`` is the drainer's business and is ignored here.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from urllib.parse import SplitResult, parse_qsl

from tributary.change import Txn
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv, KvError
from tributary.ddlhistory import KvDdlHistory
from tributary.pumpclient import PumpClientError, PumpsClient
from tributary.settings.security import SecuritySettings
from tributary.sinks.port import SinkError, SinkOptions, pending
from tributary.sinks.pump.catalog import PumpCatalog
from tributary.sinks.pump.rows import BinlogWriter
from tributary.sinks.pump.write import TxnWriter
from tributary.sinks.urls import unknown_options
from tributary.telemetry.tls import TlsError, client_context
from tributary.tso.client import Tso
from tributary.tso.cluster import discover

log = logging.getLogger(__name__)

PREFIX = b"/tributary/pump-sink/"


def checkpoint_key(name: str) -> bytes:
    return PREFIX + name.encode() + b"/checkpoint"


class PumpSink:
    """Built from its ports (tests use fakes); :func:`open_url` builds the real ones."""

    def __init__(
        self,
        kv: Kv,
        tso: Tso,
        pumps: BinlogWriter,
        name: str,
        *,
        safe_mode: bool = False,
        window: int = 128,
        resources: AsyncExitStack | None = None,
    ) -> None:
        if not name or "/" in name:
            raise SinkError(f"pump sink name {name!r}: want a non-empty name without '/'")
        self.safe_mode = safe_mode
        self.name = name
        self._kv = kv
        self._key = checkpoint_key(name)
        self._catalog = PumpCatalog(KvDdlHistory(kv))
        self._writer = TxnWriter(tso, pumps, self._catalog, window=window)
        self._resources = resources
        self._checkpoint: int | None = None

    async def start(self) -> PumpSink:
        """Read the checkpoint and the catalog (the DDL history)."""
        try:
            item = await self._kv.get(self._key)
        except KvError as e:
            raise SinkError(f"reading {self._key!r}: {e}", retriable=e.retriable) from e
        if item is not None:
            try:
                self._checkpoint = int(item.value)
            except ValueError as e:
                raise SinkError(f"{self._key!r} holds {item.value[:40]!r}, not a ts") from e
        await self._catalog.load()
        log.info(
            "pump sink %s: checkpoint %s, schema version %d",
            self.name,
            self._checkpoint,
            self._catalog.version,
        )
        return self

    async def apply(self, txns: Sequence[Txn]) -> None:
        todo = pending(txns, self._checkpoint)
        if not todo:
            return
        await self._writer.write(todo)
        last = todo[-1].commit_ts
        try:
            await self._kv.put(self._key, str(last).encode())
        except KvError as e:
            raise SinkError(f"saving the checkpoint {last}: {e}", retriable=e.retriable) from e
        self._checkpoint = last

    async def checkpoint(self) -> int | None:
        return self._checkpoint

    async def close(self) -> None:
        if self._resources is not None:
            resources, self._resources = self._resources, None
            await resources.aclose()


@dataclass(frozen=True, slots=True)
class PumpSinkUrl:
    endpoints: tuple[str, ...]
    name: str
    cluster_id: int | None = None
    security: SecuritySettings = field(default_factory=SecuritySettings)


_KNOWN = {"name", "cluster-id", "ssl-ca", "ssl-cert", "ssl-key"}


def parse_url(url: SplitResult) -> PumpSinkUrl:
    """The parts of a ``pump://`` URL; a SinkError names every problem."""
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    problems = [p for p in (unknown_options(url, _KNOWN),) if p]
    endpoints = tuple(f"http://{e.strip()}" for e in url.netloc.split(",") if e.strip())
    if not endpoints:
        problems.append("no etcd endpoint (pump://HOST:PORT[,HOST:PORT]/?name=X)")
    name = query.get("name", "")
    if not name or "/" in name:
        problems.append("name= is required (the checkpoint's key), without '/'")
    cluster_id = None
    if "cluster-id" in query:
        try:
            cluster_id = int(query["cluster-id"])
            if cluster_id <= 0:
                raise ValueError("not positive")
        except ValueError as e:
            problems.append(f"cluster-id={query['cluster-id']!r}: {e}")
    security = SecuritySettings(
        ssl_ca=query.get("ssl-ca", ""),
        ssl_cert=query.get("ssl-cert", ""),
        ssl_key=query.get("ssl-key", ""),
    )
    problems += [f"{key}: {why}" for key, why in security.validate()]
    if problems:
        raise SinkError(f"pump sink URL {url.geturl()!r}: {'; '.join(problems)}")
    return PumpSinkUrl(endpoints, name, cluster_id, security)


async def open_url(url: SplitResult, options: SinkOptions) -> PumpSink:
    """The ``pump://`` opener for ``sinks.schemes``."""
    cfg = parse_url(url)
    stack = AsyncExitStack()
    try:
        kv = await stack.enter_async_context(EtcdKv.connect(list(cfg.endpoints)))
        ssl = client_context(cfg.security)
        clock = await discover(kv, cfg.endpoints, ssl_context=ssl)
        cluster_id = cfg.cluster_id or clock.cluster_id
        if cluster_id is None:
            raise SinkError(
                "pump sink: etcd has no cluster ID yet (start a pump first)", retriable=True
            )
        clock = dataclasses.replace(clock, cluster_id=cluster_id)
        tso: Tso = await stack.enter_async_context(clock.tso(kv, ssl_context=ssl))
        pumps = await stack.enter_async_context(
            PumpsClient(
                kv,
                cluster_id,
                ssl_context=client_context(cfg.security),
                stats=options.pump_stats,
            )
        )
        sink = PumpSink(kv, tso, pumps, cfg.name, safe_mode=options.safe_mode, resources=stack)
        return await sink.start()
    except KvError as e:
        await stack.aclose()
        raise SinkError(f"pump sink: etcd: {e}", retriable=e.retriable) from e
    except PumpClientError as e:
        await stack.aclose()
        raise SinkError(f"pump sink: {e}", retriable=e.retriable) from e
    except TlsError as e:
        await stack.aclose()
        raise SinkError(f"pump sink: {e}") from e
    except BaseException:
        await stack.aclose()
        raise
