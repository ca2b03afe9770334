"""The set of known pumps, split into available and unavailable, kept in step
with the pump records (TiDB pump client's ``PumpInfos``; pure, no I/O).

Invariants:
- every known pump is in exactly one of ``available`` / ``unavailable``;
- ``available`` holds only online pumps (a record that leaves ``online`` moves
  its pump out at once; one that becomes ``online`` moves it in with its error
  count cleared); pumps whose errors pass the limit leave it on
  :meth:`PumpSet.check_usable`;
- the selector always holds exactly the available pumps, ordered by node id,
  and is given them again only when that set changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from tributary.pumpclient.pump import Pump
from tributary.pumpclient.selector import Selector
from tributary.pumpclient.source import PumpChange
from tributary.registry.status import NodeState, NodeStatus

log = logging.getLogger(__name__)


class PumpSet:
    def __init__(
        self,
        make_pump: Callable[[NodeStatus], Pump],
        selector: Selector[Pump],
        *,
        max_err_nums: int,
        on_removed: Callable[[Pump], None],
    ) -> None:
        self.pumps: dict[str, Pump] = {}
        self.available: dict[str, Pump] = {}
        self.unavailable: dict[str, Pump] = {}
        self._make_pump = make_pump
        self._selector = selector
        self._max_err_nums = max_err_nums
        self._on_removed = on_removed

    def select(self, start_ts: int, retry: int) -> Pump | None:
        return self._selector.select(start_ts, retry)

    def online(self) -> list[Pump]:
        """Every pump whose record says online, usable or not, by node id."""
        return [p for _, p in sorted(self.pumps.items()) if p.should_be_usable]

    def usable(self, pump: Pump) -> bool:
        return pump.usable(self._max_err_nums)

    def is_current(self, pump: Pump) -> bool:
        """False once ``pump`` was removed (or replaced by a new record)."""
        return self.pumps.get(pump.node_id) is pump

    def upsert(self, status: NodeStatus, *, from_watch: bool = False) -> None:
        pump = self.pumps.get(status.node_id)
        if pump is None:
            if from_watch and status.state is NodeState.OFFLINE:
                return  # TiDB ignores a new record that is already offline
            pump = self._make_pump(status)
            self.pumps[status.node_id] = pump
            log.info("pump %s at %s added (%s)", status.node_id, status.addr, status.state)
            if pump.should_be_usable:
                self.available[pump.node_id] = pump
                self._refresh()
            else:
                self.unavailable[pump.node_id] = pump
            return
        old = pump.status
        pump.status = status
        if status.addr != old.addr:
            log.info("pump %s moved from %s to %s", status.node_id, old.addr, status.addr)
            pump.transport.set_addr(status.addr)
        if status.state is old.state:
            return
        log.info("pump %s is now %s (was %s)", status.node_id, status.state, old.state)
        if status.state is NodeState.ONLINE:
            pump.err_num = 0
            self.set_available(pump, True)
        elif old.state is NodeState.ONLINE:
            self.set_available(pump, False)

    def remove(self, node_id: str) -> None:
        pump = self.pumps.pop(node_id, None)
        if pump is None:
            return
        log.info("pump %s removed", node_id)
        self.unavailable.pop(node_id, None)
        if self.available.pop(node_id, None) is not None:
            self._refresh()
        self._on_removed(pump)

    def apply(self, change: PumpChange) -> None:
        if change.status is None:
            self.remove(change.node_id)
        else:
            self.upsert(change.status, from_watch=True)

    def reconcile(self, statuses: Iterable[NodeStatus]) -> None:
        """Make the set match a fresh listing (after a broken watch)."""
        seen = set()
        for status in statuses:
            seen.add(status.node_id)
            self.upsert(status, from_watch=True)
        for node_id in [n for n in self.pumps if n not in seen]:
            self.remove(node_id)

    def set_available(self, pump: Pump, available: bool) -> None:
        if not self.is_current(pump):
            return
        if available and pump.node_id not in self.available:
            self.unavailable.pop(pump.node_id, None)
            self.available[pump.node_id] = pump
            self._refresh()
        elif not available and pump.node_id in self.available:
            del self.available[pump.node_id]
            self.unavailable[pump.node_id] = pump
            self._refresh()

    def check_usable(self) -> None:
        """Move every available pump that is no longer usable out (after a
        failed write, as TiDB's ``checkPumpAvaliable``)."""
        for pump in [p for p in self.available.values() if not self.usable(p)]:
            log.warning("pump %s unavailable after %d errors", pump.node_id, pump.err_num)
            self.set_available(pump, False)

    def close(self) -> None:
        for node_id in list(self.pumps):
            self.remove(node_id)

    def _refresh(self) -> None:
        self._selector.set_pumps([p for _, p in sorted(self.available.items())])
