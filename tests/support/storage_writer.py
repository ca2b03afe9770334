"""A pump-storage writer process for crash tests: ``python -m tests.support.storage_writer DIR``.

Concurrent callers run transactions against ``Storage`` (small segments, fsync
on) and report on stdout, one line each, only after ``write`` returned:

* ``commit <start_ts> <commit_ts>``: the commit binlog is acknowledged;
* ``rollback <start_ts>``: the rollback binlog is acknowledged;
* ``fake <ts>``: a fake binlog is acknowledged;
* ``abandoned <start_ts>``: the prewrite is acknowledged and no commit/rollback
  will ever follow (as if its client died).

Every prewrite's row value is ``b"v<start_ts>"`` so a reader can check that a
pulled commit carries its own prewrite. It runs until killed.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import sys
import time
from pathlib import Path

from services.pump.storage import Storage, StorageSettings
from tests.support.pump_binlogs import commit, fake, prewrite, rollback
from tributary.wire import ts

SETTINGS = StorageSettings(segment_size=32 * 1024, stop_write_at_available_space=0)


async def main(data_dir: Path, callers: int) -> None:
    clock = itertools.count(ts.compose(int(time.time() * 1000), 0))
    out = sys.stdout

    async def txns(storage: Storage, n: int) -> None:
        for i in itertools.count():
            start = next(clock)
            await storage.write([prewrite(start, value=b"v%d" % start)])
            await asyncio.sleep(random.random() * 0.003)  # the 2PC between P and C
            if (i + n) % 50 == 49:
                out.write(f"abandoned {start}\n")
            elif (i + n) % 10 == 9:
                await storage.write([rollback(start)])
                out.write(f"rollback {start}\n")
            else:
                commit_ts = next(clock)
                await storage.write([commit(start, commit_ts)])
                out.write(f"commit {start} {commit_ts}\n")
            out.flush()

    async def fakes(storage: Storage) -> None:
        while True:
            t = next(clock)
            await storage.write([fake(t)])
            out.write(f"fake {t}\n")
            out.flush()
            await asyncio.sleep(0.002)

    async with Storage.open(data_dir, SETTINGS) as storage, asyncio.TaskGroup() as tg:
        tg.create_task(fakes(storage), name="fakes")
        for n in range(callers):
            tg.create_task(txns(storage, n), name=f"txns-{n}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 16))
