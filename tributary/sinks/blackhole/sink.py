"""The blackhole sink: counts what it is given and drops it (for benchmarks and plumbing tests).

It keeps the checkpoint in memory only, with the same ordering and replay rules as every sink:
commit ts strictly increase through a batch, and transactions at or below the checkpoint are
skipped (not counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from urllib.parse import SplitResult

from tributary.change import Txn
from tributary.sinks.port import SinkError, SinkOptions, pending
from tributary.sinks.urls import refuse_unknown_options


class BlackholeSink:
    def __init__(self, checkpoint: int | None = None, *, safe_mode: bool = False) -> None:
        self._checkpoint = checkpoint
        self.safe_mode = safe_mode  # nothing to make safe; kept for the Sink protocol
        self._closed = False
        self.txns = 0  # transactions with rows
        self.rows = 0
        self.ddls = 0

    async def __aenter__(self) -> BlackholeSink:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def apply(self, txns: Sequence[Txn]) -> None:
        if self._closed:
            raise SinkError("blackhole sink is closed")
        todo = pending(txns, self._checkpoint)
        if not todo:
            return
        for t in todo:
            self.txns += bool(t.rows)
            self.rows += len(t.rows)
            self.ddls += t.ddl is not None
        self._checkpoint = todo[-1].commit_ts

    async def checkpoint(self) -> int | None:
        return self._checkpoint

    async def close(self) -> None:
        self._closed = True


async def open_url(url: SplitResult, options: SinkOptions) -> BlackholeSink:
    """The ``blackhole://`` opener for ``sinks.schemes``."""
    refuse_unknown_options("blackhole", url, ())
    return BlackholeSink(safe_mode=options.safe_mode)
