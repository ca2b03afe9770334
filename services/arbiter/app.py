"""Composition root of ``binlog-arbiter``: Kafka topic -> sink, resuming where it stopped.

Start order: the ``arbiter_checkpoint`` row (``services.arbiter.checkpoint``) -> the sink
(``open_sink`` on ``[down]``; its own checkpoint row, keyed by ``checkpoint_key(topic)``, moves
in the same downstream transaction as the rows) -> the Kafka reader -> the start position ->
the row saved with status 1 -> the HTTP server (``/metrics``, ``/status``, ``/health``) -> the
syncer and the safe-mode timer in one TaskGroup. A clean stop (SIGTERM) finishes the batch in
hand and saves status 0.

Start position: the last applied commit ts is the largest of the sink's checkpoint and the row's
ts (``initial-commit-ts`` when there is neither); reading starts at the row's offset, or, with
none (a first start, or a row tidb-binlog's arbiter wrote), at the first message above that ts
found by binary search. Example: the sink says 70, the row (70, 1, offset 11): read from 11,
in safe mode for 5 minutes because status 1 says the last run did not stop cleanly. A topic of
several partitions (a drainer with ``kafka-partition-by``) is read in all of them, each from its
first message above the ts found by binary search (the row's offset is kept as -1), and merged
by commit ts (``merge``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack

from aiohttp import web

from services.arbiter.checkpoint import (
    STATUS_NORMAL,
    STATUS_RUNNING,
    ArbiterCheckpoint,
    open_store,
)
from services.arbiter.config import ArbiterConfig
from services.arbiter.merge import PartitionMerge
from services.arbiter.metrics import ArbiterMetrics
from services.arbiter.reader import PARTITION, TopicReader
from services.arbiter.syncer import Record, Syncer, decode
from tributary.change import Txn
from tributary.errors import TributaryError
from tributary.net import split_host_port
from tributary.sinks import Sink, SinkOptions
from tributary.sinks.schemes import open_sink
from tributary.sinks.urls import redact
from tributary.telemetry.http import OpsServer, json_response

log = logging.getLogger(__name__)

SAFE_MODE_WINDOW = 300.0  # seconds of safe mode after a start that follows a crash


def checkpoint_key(topic: str) -> int:
    """The sink checkpoint's key (its "cluster ID") for ``topic``: 63 bits of its BLAKE2b hash,
    so two arbiters of two topics, or a drainer, never share a checkpoint row."""
    digest = hashlib.blake2b(topic.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


async def start_position(
    reader: TopicReader, saved: ArbiterCheckpoint | None, sink_ts: int | None, initial_ts: int
) -> tuple[int, dict[int, int]]:
    """(last applied commit ts, offset of the next message to read in each partition). The
    stored offset serves a topic of one partition; with more, each partition is searched."""
    known = [t for t in (sink_ts, saved.ts if saved else None) if t is not None]
    last = max(known) if known else initial_ts
    single = reader.partitions == [PARTITION]
    if single and saved is not None and saved.offset >= 0:
        return last, {PARTITION: saved.offset}
    offsets = {}
    for p in reader.partitions:
        if last <= 0:
            offsets[p] = (await reader.bounds(p))[0]
            continue
        offsets[p] = await reader.offset_after(last, _ts_in(reader.topic, p), p)
    return max(last, 0), offsets


def _ts_in(topic: str, partition: int) -> Callable[[int, bytes | None], int]:
    return lambda offset, value: decode(topic, partition, offset, value).commit_ts


def decoder(topic: str) -> Callable[[Record], Txn]:
    """A message's transaction, for the merge (MalformedMessage for one that does not decode)."""
    return lambda r: decode(topic, r.partition, r.offset, r.value)


async def _safe_mode_window(sink: Sink, stop: asyncio.Event) -> None:
    sink.safe_mode = True
    log.info("the last run did not stop cleanly: safe mode for %.0f s", SAFE_MODE_WINDOW)
    try:
        async with asyncio.timeout(SAFE_MODE_WINDOW):
            await stop.wait()
    except TimeoutError:
        sink.safe_mode = False
        log.info("safe mode off")


def _routes(syncer: Syncer, topic: str, syncer_partitions: list[int]) -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.get("/status")
    async def status(request: web.Request) -> web.Response:
        return json_response(
            {
                "topic": topic,
                "partitions": syncer_partitions,
                "ts": syncer.last_ts,
                "offset": syncer.next_offset,
            }
        )

    return routes


async def serve(cfg: ArbiterConfig, stop: asyncio.Event) -> None:
    up, down = cfg.up, cfg.down
    url = down.sink_url()
    if cfg.metrics.addr:
        log.warning("[metrics] addr: a push gateway is not supported; scrape /metrics on addr")
    metrics = ArbiterMetrics()
    async with AsyncExitStack() as stack:
        store = await open_store(url, up.topic)
        stack.push_async_callback(store.close)
        saved = await store.load()
        options = SinkOptions(
            cluster_id=checkpoint_key(up.topic),
            safe_mode=down.safe_mode,
            worker_count=down.worker_count,
            batch_size=down.batch_size,
        )
        sink = await stack.enter_async_context(open_sink(url, options))
        reader = await TopicReader.open(up.brokers, up.topic, up.kafka_max_message_size)
        stack.push_async_callback(reader.close)
        last_ts, offsets = await start_position(
            reader, saved, await sink.checkpoint(), up.initial_commit_ts
        )
        for p, offset in offsets.items():
            await reader.seek(offset, p)
        single = list(offsets) == [PARTITION]
        syncer = Syncer(
            PartitionMerge(reader, decoder(up.topic)),
            sink,
            store,
            last_ts=last_ts,
            next_offset=offsets[PARTITION] if single else -1,
            partition=PARTITION if single else None,
            skip_malformed=up.skip_malformed,
            observer=metrics,
        )
        await store.save(syncer.checkpoint)
        log.info(
            "arbiter: topic %s from offsets %s (partition: offset; applied up to ts %d) into %s",
            up.topic,
            offsets,
            last_ts,
            redact(url),
        )
        host, port = split_host_port(cfg.addr)
        ops = OpsServer(host, port, _routes(syncer, up.topic, reader.partitions), metrics.registry)
        await stack.enter_async_context(ops)
        try:
            async with asyncio.TaskGroup() as tg:
                if saved is not None and saved.status == STATUS_RUNNING and not down.safe_mode:
                    tg.create_task(_safe_mode_window(sink, stop), name="arbiter-safe-mode")
                tg.create_task(syncer.run(stop), name="arbiter-syncer")
        except BaseExceptionGroup as group:
            error = group.exceptions[0]
            if isinstance(error, TributaryError):
                log.error("arbiter stopped: %s", error)
            raise error from None
        final = ArbiterCheckpoint(syncer.last_ts, STATUS_NORMAL, syncer.next_offset)
        await store.save(final)
        log.info("arbiter stopped cleanly at ts %d, offset %d", final.ts, final.offset)
