"""Whether this pump's registration in etcd is current: the gate on prewrites.

The pump's record (``/tidb-binlog/v1/pumps/<id>``) is rewritten by every heartbeat. A pump
cut from etcd cannot rewrite it: drainers, binlogctl and the pump clients then act on a record
the pump no longer stands behind (an operator may mark it offline, a drainer may stop waiting
for it). So a pump whose last successful registry write is older than
``registration-timeout`` stops taking prewrites (``WriteRefused``, not-registered, retriable:
the pump client moves the transaction to another pump) until a write succeeds again.
Commits, rollbacks and fake binlogs are still taken, so transactions under way finish.

Worked example (heartbeat every 2 s, timeout 10 s): beats succeed at t=0, 2, 4; etcd is cut
at t=5; the beats of t=6 and t=13 time out; from t=14 (4 + 10) every prewrite is refused; the
cut heals at t=18 and the beat of t=20 succeeds: prewrites are taken again.

Invariant: a prewrite is acknowledged only within ``timeout`` seconds (by this process's
monotonic clock) of a registry write that succeeded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Registration:
    """Remembers the last successful registry write; ``current()`` is the prewrite gate."""

    def __init__(self, timeout: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        if timeout <= 0:
            raise ValueError("registration timeout must be positive")
        self.timeout = timeout
        self._monotonic = monotonic
        self._renewed: float | None = None  # never registered yet
        self._lapsed = False

    def renewed(self) -> None:
        """A registry write succeeded just now."""
        self._renewed = self._monotonic()
        if self._lapsed:
            self._lapsed = False
            log.warning("registration in etcd renewed; taking prewrites again")

    def age(self) -> float | None:
        """Seconds since the last successful registry write (None: never)."""
        return None if self._renewed is None else self._monotonic() - self._renewed

    def current(self) -> bool:
        age = self.age()
        ok = age is not None and age < self.timeout
        if not ok and not self._lapsed and age is not None:
            self._lapsed = True
            log.error(
                "registration in etcd not renewed for %.1f s (registration-timeout %.1f s); "
                "refusing prewrites until etcd is reachable again",
                age,
                self.timeout,
            )
        return ok
