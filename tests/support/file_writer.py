"""The file sink's kill -9 test writer: a process (``python -m tests.support.file_writer DIR``)
that writes batches of three transactions forever and prints each checkpoint it reached; ``ins``
builds its transactions."""

from __future__ import annotations

import asyncio
import sys

from tributary.change import RowChange, TableInfo, Txn
from tributary.sinks.file.sink import FileSink

ACCT = TableInfo.build("shop", "acct", [("id", "int"), ("name", "varchar(20)")], ["id"])


def ins(ts: int, *ids: int) -> Txn:
    rows = tuple(RowChange.insert(ACCT, {"id": i, "name": f"n{i}" * 5}) for i in ids)
    return Txn(ts, ts - 1, rows)


async def write_forever(directory: str) -> None:
    """Write batches of three transactions forever, printing each checkpoint reached."""
    async with await FileSink.open(directory, segment_size=4096) as sink:
        ts = (await sink.checkpoint() or 0) + 1
        while True:
            await sink.apply([ins(t, t, t + 1_000_000) for t in range(ts, ts + 3)])
            ts += 3
            print(ts - 1, flush=True)


if __name__ == "__main__":
    asyncio.run(write_forever(sys.argv[1]))
