"""The client's two background duties: following the pump records, and
probing unavailable pumps back into rotation.

Invariants: a broken watch never ends the follow loop: it lists again
(reconciling additions and removals it may have missed) and watches again
after a pause; a probe only ever moves an *online* pump that answered an
empty ``WriteBinlog`` into the available set.
"""

from __future__ import annotations

import asyncio
import logging

from tributary.pumpclient.clock import Clock
from tributary.pumpclient.errors import RpcFailure
from tributary.pumpclient.membership import PumpSet
from tributary.pumpclient.pump import Pump
from tributary.pumpclient.source import PumpSource, PumpSourceError
from tributary.pumpclient.stats import ClientStats

log = logging.getLogger(__name__)


async def follow_pumps(source: PumpSource, pumps: PumpSet, clock: Clock, pause: float) -> None:
    """Apply every pump record change to ``pumps``, forever."""
    relist = False
    while True:
        try:
            if relist:
                pumps.reconcile(await source.list_pumps())
            async for change in source.watch_pumps():
                pumps.apply(change)
        except PumpSourceError as e:
            log.warning("pump watch failed, watching again: %s", e)
        relist = True
        await clock.sleep(pause)


async def probe_loop(pumps: PumpSet, stats: ClientStats, clock: Clock, interval: float) -> None:
    while True:
        await clock.sleep(interval)
        await probe_unavailable(pumps, stats)


async def probe_unavailable(pumps: PumpSet, stats: ClientStats) -> None:
    """Probe every online pump in the unavailable set, concurrently."""
    targets = [p for p in pumps.unavailable.values() if p.should_be_usable]
    await asyncio.gather(*(_probe(p, pumps, stats) for p in targets))


async def _probe(pump: Pump, pumps: PumpSet, stats: ClientStats) -> None:
    stats.probes += 1
    try:
        await pump.probe()
    except RpcFailure as e:
        log.debug("probe of pump %s failed: %s", pump.node_id, e)
        return
    log.info("pump %s answers probes again: available", pump.node_id)
    stats.probe_recoveries += 1
    pumps.set_available(pump, True)
