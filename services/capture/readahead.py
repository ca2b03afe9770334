"""How much a processor reads ahead of its sink: the changefeed's ``memory-quota``, in bytes.

The reader takes an estimate of each transaction's size (``txn_bytes``: its values' lengths,
8 bytes a number, 64 bytes of overhead per row and per transaction) from a ``ReadAhead``
budget before queueing it; the applier gives it back once the transaction is in the sink.
The reader waits while the budget is spent, except that a transaction larger than the whole
quota still passes when nothing else is queued (so a huge transaction never stalls the feed).

Example: quota 1 MiB, transactions of 300 KiB: three are queued, the fourth waits until the
sink has taken the first.
"""

from __future__ import annotations

import asyncio

from tributary.change import Txn

_OVERHEAD = 64


def _size(value: object) -> int:
    if isinstance(value, (str, bytes)):
        return len(value)
    return 8


def txn_bytes(txn: Txn) -> int:
    total = _OVERHEAD
    for row in txn.rows:
        total += _OVERHEAD + sum(_size(v) for v in row.values.values())
        if row.old_values is not None:
            total += sum(_size(v) for v in row.old_values.values())
    return total


class ReadAhead:
    def __init__(self, quota: int) -> None:
        self.quota = quota
        self.used = 0
        self._cond = asyncio.Condition()

    async def take(self, n: int) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.used == 0 or self.used + n <= self.quota)
            self.used += n

    async def give(self, n: int) -> None:
        async with self._cond:
            self.used -= n
            self._cond.notify_all()
