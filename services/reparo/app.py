"""reparo's run: read the data directory, filter, apply to the destination in batches.

The destination is any sink (``sinks.schemes.open_sink``) opened with cluster ID 0; its
checkpoint says what an earlier run applied, so reading starts after it and a re-run applies
nothing twice. Each batch holds ``txn-batch`` whole transactions; transactions the filter
empties become checkpoint-only markers, so the checkpoint still moves over them. Files are read
in a worker thread, one batch at a time, so the event loop stays free for the sink. Progress
(``telemetry.progress``): rows applied, binlogs read, the done fraction estimated from the bytes
read of the files' size.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from services.reparo.config import ReparoConfig
from services.reparo.reader import ReadProgress, read_txns
from tributary.change import Txn
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink
from tributary.telemetry.progress import Progress

log = logging.getLogger(__name__)


@dataclass
class RunStats:
    txns: int = 0  # transactions read in the range (filtered ones included)
    rows: int = 0  # row changes applied
    ddls: int = 0  # DDL applied
    last_ts: int = 0  # commit ts of the last transaction read


def _take(source: Iterator[Txn], n: int) -> list[Txn]:
    return list(islice(source, n))


async def run(cfg: ReparoConfig, progress: Progress | None = None) -> RunStats:
    """Replay ``cfg.data_dir`` into the destination; raises SinkError subclasses on failure."""
    table_filter = cfg.table_filter()
    options = SinkOptions(cluster_id=0, safe_mode=cfg.safe_mode, worker_count=cfg.worker_count)
    stats = RunStats()
    async with open_sink(cfg.destination(), options) as sink:
        applied = await sink.checkpoint()
        start = max(cfg.start_ts(), (applied or 0) + 1)
        log.info(
            "reparo: %s from commit ts %d to %s (destination checkpoint %s)",
            cfg.data_dir,
            start,
            cfg.stop_ts() or "the end",
            applied,
        )
        read = ReadProgress()
        source = read_txns(Path(cfg.data_dir), start, cfg.stop_ts(), read)
        while batch := await asyncio.to_thread(_take, source, cfg.txn_batch):
            kept = [table_filter.filter(t) for t in batch]
            await sink.apply(kept)
            stats.txns += len(batch)
            stats.rows += sum(len(t.rows) for t in kept)
            stats.ddls += sum(t.ddl is not None for t in kept)
            stats.last_ts = batch[-1].commit_ts
            if progress is not None:
                progress.count("binlogs", len(batch))
                if (f := read.fraction()) is not None:
                    progress.estimate(f)
                progress.add(sum(len(t.rows) for t in kept))
    log.info(
        "reparo: done: %d transactions read, %d row changes and %d DDL applied, last commit ts %d",
        stats.txns,
        stats.rows,
        stats.ddls,
        stats.last_ts,
    )
    return stats
