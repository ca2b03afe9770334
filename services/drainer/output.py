"""Where the drainer's merged binlogs go: the ``Sink`` port and two trivial sinks.

The real sinks (MySQL, SQLite, file, Kafka, ...) live elsewhere; this module
defines what the drainer core needs of one and picks an implementation by the
URL scheme of ``sink-uri``: ``print://`` writes one line per binlog to stdout,
``blackhole://`` accepts and drops everything.

Invariant (the contract every sink keeps): ``apply`` returns only once the
binlog is durably taken, because the drainer's checkpoint passes it right
after. A sink receives commits in strictly increasing commit ts and never a
fake binlog.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol, TextIO
from urllib.parse import urlsplit

from services.drainer.errors import SinkError
from services.drainer.item import PulledBinlogItem

__all__ = ["BlackholeSink", "PrintSink", "PulledBinlogItem", "Sink", "make_sink"]


class Sink(Protocol):
    async def apply(self, binlog: PulledBinlogItem) -> None:
        """Take one committed binlog; returning means the checkpoint may pass it."""


class BlackholeSink:
    """Accepts everything and keeps nothing (benchmarks, tests)."""

    def __init__(self) -> None:
        self.count = 0

    async def apply(self, binlog: PulledBinlogItem) -> None:
        self.count += 1


class PrintSink:
    """One line per binlog: ``commit_ts=... start_ts=... bytes=...``."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out

    async def apply(self, binlog: PulledBinlogItem) -> None:
        out = self._out if self._out is not None else sys.stdout
        out.write(
            f"commit_ts={binlog.commit_ts} start_ts={binlog.start_ts} bytes={len(binlog.payload)}\n"
        )
        out.flush()


SINKS: dict[str, Callable[[], Sink]] = {"print": PrintSink, "blackhole": BlackholeSink}


def make_sink(uri: str) -> Sink:
    """The sink for ``uri``, chosen by its scheme; SinkError for an unknown one."""
    scheme = urlsplit(uri).scheme.lower()
    factory = SINKS.get(scheme)
    if factory is None:
        known = ", ".join(f"{s}://" for s in sorted(SINKS))
        raise SinkError(f"unsupported sink {uri!r}; this drainer knows {known}")
    return factory()
