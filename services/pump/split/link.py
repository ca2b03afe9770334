"""A front process's end of the link to the storage writer.

Concurrent writes in one front are coalesced: every ``store`` call of one event-loop turn goes
into one ``WRITE`` frame (one syscall, one request to the writer's group commit), and the
frame's ``ACK`` is split back to its callers.

Worked example: three WriteBinlog handlers call ``store`` in the same turn with 1, 1 and 2
binlogs; one frame of 4 binlogs goes out as batch 9; its ack (count 0: all stored) resolves
the three calls with ``[None]``, ``[None]``, ``[None, None]``.

Invariant: a caller is told "stored" only from the writer's ack. When the link breaks (the
writer died or closed it) every pending and later call fails with a retriable
``WriteRefused``, and ``lost`` is set, so the front stops serving rather than keep a port
that cannot store anything.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass

from services.pump.intake import Reason, WriteRefused
from services.pump.metrics import Observed
from services.pump.split.frames import (
    ACK,
    HELLO,
    PREFIX,
    BadFrame,
    decode_ack,
    encode_observed,
    encode_write,
    frame,
)
from services.pump.split.local import connect_local, handed_over
from services.pump.storage import WriteItem

Results = list[WriteRefused | None]
CLOSE_WITHIN = 2.0  # seconds a closing link may take to send what is buffered


@dataclass(slots=True)
class _Call:
    items: Sequence[WriteItem]
    future: asyncio.Future[Results]


class WriterLink:
    """One connection to the writer; ``store`` is safe from many tasks at once."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._batches = itertools.count(1)
        self._queued: list[_Call] = []
        self._in_flight: dict[int, list[_Call]] = {}
        self._broken: WriteRefused | None = None
        self.lost = asyncio.Event()
        self._acks = asyncio.create_task(self._read_acks(), name="pump-front-link-acks")

    @classmethod
    async def connect(cls, path: str) -> WriterLink:
        sock = connect_local(path)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        handed_over(sock, writer.transport)
        return cls(reader, writer)

    def hello(self) -> None:
        """Tell the writer this front now serves the port."""
        self._writer.write(frame(HELLO, os.getpid()))

    def send_observed(self, observed: Sequence[Observed]) -> None:
        """Ship the front's RPC observations (``split.observations``); dropped once broken."""
        if observed and self._broken is None:
            self._writer.write(encode_observed(os.getpid(), observed))

    async def store(self, items: Sequence[WriteItem]) -> Results:
        """Each binlog's refusal, or None once the writer made it durable."""
        if self._broken is not None:
            raise self._broken
        future: asyncio.Future[Results] = asyncio.get_running_loop().create_future()
        if not self._queued:
            asyncio.get_running_loop().call_soon(self._flush)
        self._queued.append(_Call(items, future))
        return await future

    def _flush(self) -> None:
        calls, self._queued = self._queued, []
        if not calls:
            return
        if self._broken is not None:
            self._fail(calls)
            return
        batch = next(self._batches)
        items = calls[0].items if len(calls) == 1 else [it for c in calls for it in c.items]
        self._in_flight[batch] = calls
        self._writer.write(encode_write(batch, items))

    async def _read_acks(self) -> None:
        why = "the pump's storage writer closed the link"
        try:
            while True:
                length, kind, batch = PREFIX.unpack(await self._reader.readexactly(PREFIX.size))
                body = await self._reader.readexactly(length - (PREFIX.size - 4))
                calls = self._in_flight.pop(batch, None)
                if kind != ACK or calls is None:
                    raise BadFrame(f"unexpected frame kind {kind} for batch {batch}")
                results = decode_ack(body, sum(len(c.items) for c in calls))
                pos = 0
                for c in calls:
                    n = len(c.items)
                    if not c.future.done():
                        c.future.set_result(results[pos : pos + n])
                    pos += n
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            why = f"the pump's storage writer is gone ({e!r})"
        except BadFrame as e:
            why = f"the pump's storage writer sent a bad frame ({e})"
        finally:
            self._break(why)

    def _break(self, why: str) -> None:
        self._broken = WriteRefused(Reason.STORAGE, f"{why}; nothing acknowledged", retriable=True)
        for calls in self._in_flight.values():
            self._fail(calls)
        self._in_flight.clear()
        self._fail(self._queued)
        self._queued = []
        self.lost.set()

    def _fail(self, calls: list[_Call]) -> None:
        assert self._broken is not None
        for c in calls:
            if not c.future.done():
                c.future.set_exception(self._broken)

    async def close(self) -> None:
        """Close the link once what was written to it is sent (within ``CLOSE_WITHIN``)."""
        self._writer.close()
        try:
            async with asyncio.timeout(CLOSE_WITHIN):
                await self._writer.wait_closed()
        except (OSError, TimeoutError):
            pass  # the writer is gone: nothing more can reach it
        self._acks.cancel()
        try:
            await self._acks
        except asyncio.CancelledError:
            pass
