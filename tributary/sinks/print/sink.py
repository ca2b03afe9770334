"""The print sink: one readable line per row change and DDL on a text stream (stdout by default).

Lines look like::

    commit_ts=449012345678 insert shop.orders id=1 total='9.90'
    commit_ts=449012345679 update shop.orders id=1 total='9.90' -> id=1 total='12.00'
    commit_ts=449012345680 ddl shop: ALTER TABLE orders ADD COLUMN note TEXT

Values are shown as Python literals (``repr``), so a NULL (``None``) and the string ``'None'``
differ. The checkpoint lives in memory only: a restarted drainer prints from its own
checkpoint on.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO
from urllib.parse import SplitResult

from tributary.change import Row, RowKind, Txn
from tributary.sinks.port import SinkError, SinkOptions, pending
from tributary.sinks.urls import refuse_unknown_options


def _row(values: Row) -> str:
    return " ".join(f"{k}={v!r}" for k, v in values.items())


def lines(txn: Txn) -> list[str]:
    """The lines of one transaction (none for a checkpoint-only marker)."""
    head = f"commit_ts={txn.commit_ts}"
    if txn.ddl is not None:
        where = txn.ddl.schema or "-"
        return [f"{head} ddl {where}: {txn.ddl.query}"]
    out = []
    for change in txn.rows:
        name = change.table.qualified
        if change.kind is RowKind.UPDATE:
            assert change.old_values is not None
            text = f"{_row(change.old_values)} -> {_row(change.values)}"
        else:
            text = _row(change.values)
        out.append(f"{head} {change.kind.value} {name} {text}")
    return out


class PrintSink:
    def __init__(self, out: TextIO | None = None, *, safe_mode: bool = False) -> None:
        self._out = out
        self._checkpoint: int | None = None
        self._closed = False
        self.safe_mode = safe_mode  # nothing to make safe; kept for the Sink protocol

    async def apply(self, txns: Sequence[Txn]) -> None:
        if self._closed:
            raise SinkError("print sink is closed")
        todo = pending(txns, self._checkpoint)
        if not todo:
            return
        out = self._out if self._out is not None else sys.stdout
        text = [line for txn in todo for line in lines(txn)]
        if text:
            out.write("\n".join(text) + "\n")
            out.flush()
        self._checkpoint = todo[-1].commit_ts

    async def checkpoint(self) -> int | None:
        return self._checkpoint

    async def close(self) -> None:
        self._closed = True


async def open_url(url: SplitResult, options: SinkOptions) -> PrintSink:
    """The ``print://`` opener for ``sinks.schemes``."""
    refuse_unknown_options("print", url, ())
    return PrintSink(safe_mode=options.safe_mode)
