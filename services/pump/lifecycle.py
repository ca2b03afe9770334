"""A pump's life in the cluster: joining (notify drainers), periodic duties
(fake binlogs, GC, purge alerts) and leaving safely (offline).

Invariants:
- A pump that joins (no record, or an ``offline`` one) makes every online
  drainer add it through ``binlog.Cistern/Notify`` before it accepts writes;
  if any drainer cannot be told, the pump records itself offline and stops.
- A pump goes ``offline`` only after every non-offline drainer's checkpoint
  has passed the pump's max commit ts, so no binlog it stored is left unread.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable

from grpclib.client import Channel
from grpclib.exceptions import GRPCError, StreamTerminatedError

from services.pump.intake import Intake
from services.pump.storage import Storage
from tributary.errors import TributaryError
from tributary.net import split_host_port
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.tso.client import Tso
from tributary.wire import ts as tso_ts
from tributary.wire.binlog import Binlog, BinlogType, CisternStub, NotifyReq

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT = 10.0  # seconds for the whole round of notifications
NOTIFY_ATTEMPTS = 3
EARLY_ALERT_GC = 20 * 3600.0  # seconds: alert when a drainer is this close to the GC ts


class NotifyFailed(TributaryError):
    """Some online drainer could not be told that this pump joined."""


async def _notify_one(addr: str, ssl_context: ssl.SSLContext | None) -> None:
    host, port = split_host_port(addr)
    delay = 1.0
    for attempt in range(1, NOTIFY_ATTEMPTS + 1):
        channel = Channel(host, port, ssl=ssl_context)
        try:
            await CisternStub(channel).notify(NotifyReq(), timeout=NOTIFY_TIMEOUT / 2)
            return
        except (OSError, GRPCError, StreamTerminatedError, TimeoutError) as e:
            if attempt == NOTIFY_ATTEMPTS:
                raise NotifyFailed(f"drainer at {addr} did not take Notify: {e}") from e
            log.warning("notify drainer %s failed (attempt %d): %s", addr, attempt, e)
        finally:
            channel.close()
        await asyncio.sleep(delay)
        delay *= 2


async def notify_drainers(registry: NodeRegistry, ssl_context: ssl.SSLContext | None) -> int:
    """Tell every online drainer to add this pump now; returns how many were told."""
    drainers = [d for d in await registry.list(NodeKind.DRAINER) if d.state is NodeState.ONLINE]
    try:
        async with asyncio.timeout(NOTIFY_TIMEOUT * 2):
            async with asyncio.TaskGroup() as tg:
                for d in drainers:
                    tg.create_task(_notify_one(d.addr, ssl_context), name=f"notify-{d.node_id}")
    except* (NotifyFailed, TimeoutError) as group:
        raise NotifyFailed(
            f"fail to notify all living drainers: {'; '.join(str(e) for e in group.exceptions)}"
        ) from None
    return len(drainers)


def fake_binlog(ts: int) -> bytes:
    """A fake binlog: a Rollback whose start and commit ts are one TSO timestamp."""
    return bytes(Binlog(tp=BinlogType.Rollback, start_ts=ts, commit_ts=ts))  # type: ignore[arg-type]


async def write_fake(intake: Intake, tso: Tso) -> int:
    ts = await tso.get_ts()
    await intake.write(fake_binlog(ts))
    return ts


async def fake_binlog_loop(
    intake: Intake,
    tso: Tso,
    interval: float,
    active: Callable[[], bool] = lambda: True,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Write a fake binlog whenever no write arrived for ``interval`` seconds, so
    drainers can merge past this pump while it is idle. Only while ``active()``:
    a closing pump's target must not move (see :func:`wait_safe_to_offline`)."""
    while True:
        idle = monotonic() - intake.last_write
        if idle < interval or not active():
            await asyncio.sleep(max(interval - idle, interval / 4))
            continue
        try:
            await write_fake(intake, tso)
        except Exception as e:  # the next tick retries; a broken store shows in metrics
            log.warning("writing a fake binlog failed: %s", e)
            await asyncio.sleep(interval)


def gc_ts_for(now: float, retention: float) -> int:
    return tso_ts.from_seconds(now - retention)


async def gc_loop(
    storage: Storage, retention: float, interval: float, now: Callable[[], float] = time.time
) -> None:
    while True:
        await asyncio.sleep(interval)
        await storage.gc(gc_ts_for(now(), retention))


async def detect_purged_drainers(
    registry: NodeRegistry, storage: Storage, on_alert: Callable[[str], None]
) -> list[str]:
    """Drainers whose checkpoint is behind (or within 20 h of) the GC ts."""
    limit = storage.gc_ts + (int(EARLY_ALERT_GC * 1000) << tso_ts.LOGICAL_BITS)
    behind = []
    for d in await registry.list(NodeKind.DRAINER):
        if d.state is not NodeState.OFFLINE and storage.gc_ts and d.max_commit_ts < limit:
            log.warning(
                "drainer %s checkpoint %d is older than or near the pump gc ts %d; "
                "binlogs it still needs may be purged",
                d.node_id,
                d.max_commit_ts,
                storage.gc_ts,
            )
            on_alert(d.node_id)
            behind.append(d.node_id)
    return behind


async def wait_safe_to_offline(
    intake: Intake,
    storage: Storage,
    tso: Tso,
    registry: NodeRegistry,
    poll: float = 1.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Block until every non-offline drainer consumed all of this pump's binlogs.

    Worked example: the pump's max commit ts is 100 and two prewrites are still
    open. It writes fake binlog 105 and waits until its sorter released 105 (so
    the open transactions were committed, rolled back or resolved). Drainers A
    (checkpoint 103) and B (offline) are listed: B is ignored, A is behind, so
    the pump polls again; once A reports 105 or more the pump may go offline.
    The target stays fixed: the pump is closing, so it takes no new prewrites
    and nothing it still stores can commit above 105. Returns the target.
    """
    while True:
        try:
            target = await write_fake(intake, tso)
            break
        except Exception as e:
            log.warning("offline: writing a fake binlog failed, retrying: %s", e)
            await sleep(poll)
    while storage.max_commit_ts < target or not storage.all_matched():
        await sleep(poll / 10)
    mine = storage.max_commit_ts
    while True:
        drainers = [
            d for d in await registry.list(NodeKind.DRAINER) if d.state is not NodeState.OFFLINE
        ]
        lagging = [d for d in drainers if d.max_commit_ts < mine]
        if not lagging:
            log.info(
                "all %d drainers passed max commit ts %d; safe to go offline", len(drainers), mine
            )
            return mine
        log.info(
            "offline: waiting for drainers %s to pass %d",
            ", ".join(f"{d.node_id}@{d.max_commit_ts}" for d in lagging),
            mine,
        )
        await sleep(poll)


def status_of(
    node_id: str,
    addr: str,
    state: NodeState,
    max_commit_ts: int,
    update_ts: int,
    stuck_prewrites: tuple[int, ...] = (),
) -> NodeStatus:
    return NodeStatus(
        node_id=node_id,
        addr=addr,
        state=state,
        is_alive=state is NodeState.ONLINE,
        max_commit_ts=max_commit_ts,
        update_ts=update_ts,
        stuck_prewrites=stuck_prewrites,
    )
