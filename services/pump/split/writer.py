"""The storage writer's end of the front link: a local socket the front processes write to.

Each front connects once and sends ``WRITE`` frames (``split.frames``), and about once a
second an ``OBSERVED`` frame of its RPC durations, added to the writer's metrics. Every
``WRITE`` frame is stored as one request to the intake (state rules per binlog, then one
group-commit request), and its ``ACK`` goes back only after the binlogs are durable. Frames
are handled concurrently, so the group writer merges the batches of every front into one
append and one fsync.

Invariant: an ack for a binlog is written only after ``Intake.store_validated`` returned
it stored (durable, indexed and fed to the sorter, in this process: the sorter sees every
binlog of every front through one group writer, in the order they were stored). A front whose
connection breaks loses only its unacknowledged batches; they may still be stored, as a
retried unary write may be, and the pump's index keeps one row per ts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from services.pump.intake import Intake
from services.pump.metrics import Observed
from services.pump.split.frames import (
    HELLO,
    MAX_FRAME,
    OBSERVED,
    PREFIX,
    WRITE,
    BadFrame,
    decode_items,
    decode_observed,
    encode_ack,
)
from services.pump.split.local import listen_local

log = logging.getLogger(__name__)


class WriterEnd:
    """Serves the front link on a unix socket; ``hello(pid)`` is called per ready front,
    ``observed`` with each front's RPC observations (``split.observations``)."""

    def __init__(
        self,
        intake: Intake,
        hello: Callable[[int], None] = lambda pid: None,
        observed: Callable[[Sequence[Observed]], None] = lambda observed: None,
    ) -> None:
        self._intake = intake
        self._hello = hello
        self._observed = observed
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self, path: str) -> None:
        """Listen on ``path`` (a leading NUL: Linux's abstract namespace, no file left)."""
        self._server = await asyncio.start_unix_server(self._serve, sock=listen_local(path))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(self._handlers)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        pending: set[asyncio.Task[None]] = set()
        try:
            while True:
                head = await reader.readexactly(PREFIX.size)
                length, kind, batch = PREFIX.unpack(head)
                if not PREFIX.size - 4 <= length <= MAX_FRAME:
                    raise BadFrame(f"frame length {length}")
                body = await reader.readexactly(length - (PREFIX.size - 4))
                if kind == WRITE:
                    store = self._store(writer, batch, body)
                    t = asyncio.create_task(store, name=f"pump-link-batch-{batch}")
                    pending.add(t)
                    t.add_done_callback(pending.discard)
                elif kind == HELLO:
                    self._hello(batch)
                elif kind == OBSERVED:
                    self._observed(decode_observed(body))
                else:
                    raise BadFrame(f"unknown frame kind {kind}")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the front is gone; what it had in flight is finished below
        except BadFrame as e:
            log.error("a front sent a bad frame, dropping its connection: %s", e)
        finally:
            if pending:  # stored or refused either way; nobody is told of these
                await asyncio.wait(pending)
            self._handlers.discard(task)
            writer.close()

    async def _store(self, writer: asyncio.StreamWriter, batch: int, body: bytes) -> None:
        try:
            items = decode_items(body)
        except BadFrame as e:
            log.error("a front sent a bad write frame: %s", e)
            writer.close()
            return
        results = await self._intake.store_validated(items)
        if not writer.is_closing():
            writer.write(encode_ack(batch, results))
