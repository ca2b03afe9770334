"""The blackhole read of ``bench_capture`` as a program of its own, so that ``--compare-tree``
can time another checkout's reader (``PYTHONPATH`` set to that tree) on the same backlog.

Arguments: host port user password start-file start-pos end-file end-pos rows. Prints one JSON
line: wall and process CPU seconds from opening the source to the backlog's last transaction.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

try:
    from tributary.change import TableFilter
    from tributary.sinks.blackhole.sink import BlackholeSink
    from tributary.sources.mysql import Position, SourceConfig, open_source
except ImportError:  # a tree from before the tributary package (top-level mysqlsource, sinks)
    from mysqlsource import Position, SourceConfig, open_source  # type: ignore[import-not-found,no-redef]
    from sinks.blackhole import BlackholeSink  # type: ignore[import-not-found,no-redef]
    from sinks.filter import TableFilter  # type: ignore[import-not-found,no-redef]

BATCH_ROWS = 5000


async def read(cfg: Any, start: Any, end: Any) -> tuple[float, float, int]:
    sink = BlackholeSink()
    t0, c0 = time.perf_counter(), time.process_time()
    batch: list[Any] = []
    rows = 0
    async with open_source(cfg, start) as txns:
        async for st in txns:
            batch.append(st.txn)
            rows += len(st.txn.rows)
            done = (st.position.file, st.position.pos) >= (end.file, end.pos)
            if rows >= BATCH_ROWS or done:
                await sink.apply(batch)
                batch, rows = [], 0
            if done:
                break
    return time.perf_counter() - t0, time.process_time() - c0, sink.rows


def main(argv: list[str]) -> None:
    host, port, user, password, start_file, start_pos, end_file, end_pos, rows = argv
    cfg = SourceConfig(
        host, int(port), user, password, server_id=777, filter=TableFilter(do_dbs=["bench"])
    )
    start, end = Position(start_file, int(start_pos)), Position(end_file, int(end_pos))
    wall, cpu, seen = asyncio.run(read(cfg, start, end))
    if seen != int(rows):
        raise SystemExit(f"read {seen} row events, the backlog has {rows}")
    print(json.dumps({"wall_s": wall, "cpu_s": cpu}))


if __name__ == "__main__":
    main(sys.argv[1:])
