"""The pump client counters of a process's ``pump://`` sinks, summed over its life.

A service opens its sinks through ``PumpClientCounters.options``: every ``pump://`` sink then
gets the one ``ClientStats`` in ``SinkOptions.pump_stats``, and its client adds to it. A sink
closed and opened again (a capture's processor after an error) goes on counting where the
last one stopped. Invariant: ``totals`` only grow; they are empty until a ``pump://`` sink was
opened, so a service with another downstream exports no pump client series.

A capture keeps one per changefeed (``KeyedPumpClientCounters``), so its series are labelled by
changefeed. Example: a capture runs changefeed A into ``pump://`` and B into ``mysql://``; A's
sink writes 3 P-binlogs, fails, is opened again and writes 2: A's ``totals()["prewrites_ok"]``
is 5, and B has no series.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

from tributary.pumpclient.stats import ClientStats
from tributary.sinks.port import SinkOptions


class PumpClientCounters:
    def __init__(self) -> None:
        self.stats = ClientStats()
        self.used = False  # a pump:// sink was opened with ``stats``

    def options(self, url: str, options: SinkOptions) -> SinkOptions:
        """``options`` for opening ``url``: with ``stats`` when it is a ``pump://`` URL."""
        try:
            scheme = urlsplit(url).scheme.lower()
        except ValueError:  # not a URL: ``open_sink`` says so
            return options
        if scheme != "pump":
            return options
        self.used = True
        return dataclasses.replace(options, pump_stats=self.stats)

    def totals(self) -> dict[str, int]:
        """``{counter: total}`` (``ClientStats``'s field names), read at scrape time."""
        return dataclasses.asdict(self.stats) if self.used else {}


class KeyedPumpClientCounters:
    """A ``PumpClientCounters`` per key (a capture's changefeeds: ``(namespace, id)``), each
    made when first asked for and kept for the process's life (its totals only grow)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, ...], PumpClientCounters] = {}

    def of(self, key: tuple[str, ...]) -> PumpClientCounters:
        counters = self._by_key.get(key)
        if counters is None:
            counters = self._by_key[key] = PumpClientCounters()
        return counters

    def totals(self) -> dict[tuple[str, ...], int]:
        """``{(*key, counter): total}`` of every key whose ``pump://`` sink was opened."""
        return {
            (*key, name): total
            for key, counters in self._by_key.items()
            for name, total in counters.totals().items()
        }
