"""One etcd watch as an async generator of ``WatchEvent``, surviving stream breaks.

Invariant: events come once each, in revision order. ``resume`` is always the
revision after the last one delivered (or after the revision the watch was
created at), so a re-opened stream neither repeats nor skips anything.

Example: the consumer got revisions 7 and 9; etcd restarts; meanwhile 10 and 11
are written. The stream breaks with UNAVAILABLE, we wait 0.1 s, 0.2 s, ... and
re-open from 10: the consumer gets 10 and 11, then live events.

The stream is opened on the client's current member (``coord.etcd_members``). When it
breaks, the member is failed over first, so the watch re-opens on the next one; when the
client moves away from the member for another reason (its unary calls time out: it is
frozen, and a stream on it would just stay silent), the watch re-opens on the new current
member at once, from ``resume`` as always.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

import grpc  # type: ignore[import-untyped]
from aetcd import rpc

from tributary.coord.etcd_grpc import finish_stream, mapped_error, open_stream, range_end
from tributary.coord.etcd_members import Members
from tributary.coord.kv import KvError, WatchEvent, WatchEventKind

log = logging.getLogger(__name__)

_MIN_DELAY = 0.1  # seconds before the first re-watch; doubles up to the max
_MAX_DELAY = 2.0


async def watch_events(
    members: Members, prefix: bytes, start_revision: int, live: set[object]
) -> AsyncGenerator[WatchEvent, None]:
    """Follow ``prefix`` from ``start_revision``. The watch is in ``live`` from its
    first step until it has wound down (stream ended and settled)."""
    token = object()
    live.add(token)
    resume = start_revision  # 0: from the revision the watch is created at
    delay = _MIN_DELAY
    try:
        while True:
            if members.closed:
                raise KvError("etcd watch stopped: client is closed", retriable=False)
            member = members.current
            abandoned = member.abandoned
            call = open_stream(member.watch.Watch(metadata=member.metadata))
            try:
                create = rpc.WatchCreateRequest(
                    key=prefix, range_end=range_end(prefix), start_revision=resume
                )
                await call.write(rpc.WatchRequest(create_request=create))
                while True:
                    resp = await _read(call, abandoned)
                    if resp is None:
                        log.info(
                            "etcd watch on %r leaves %s; re-watching from revision %d",
                            prefix,
                            member.endpoint,
                            resume,
                        )
                        delay = 0.0
                        break
                    if resp is grpc.aio.EOF:
                        log.warning("etcd watch on %r ended by the server", prefix)
                        break
                    _check(resp, prefix, resume)
                    if resp.created and resume == 0:
                        resume = resp.header.revision + 1  # pin "now" for any re-watch
                    delay = _MIN_DELAY
                    for ev in resp.events:
                        yield _event(ev)
                        resume = ev.kv.mod_revision + 1
            except grpc.aio.AioRpcError as e:
                err = mapped_error("watch", e)
                if not err.retriable or members.closed:
                    raise err from e
                members.fail_over(member, f"watch: {e.code().name}")
                log.warning(
                    "etcd watch on %r broke (%s); re-watching from revision %d",
                    prefix,
                    e.code().name,
                    resume,
                )
            except grpc.aio.UsageError as e:
                raise KvError("etcd watch stopped: client is closed", retriable=False) from e
            finally:
                await finish_stream(call)
            await asyncio.sleep(delay)
            delay = min(max(delay * 2, _MIN_DELAY), _MAX_DELAY)
    finally:
        live.discard(token)


async def _read(call: Any, abandoned: asyncio.Event) -> Any:
    """The stream's next message, or None once the client has left the stream's member."""
    if abandoned.is_set():
        return None
    read = asyncio.ensure_future(call.read())
    left = asyncio.ensure_future(abandoned.wait())
    try:
        await asyncio.wait((read, left), return_when=asyncio.FIRST_COMPLETED)
    finally:
        left.cancel()
        if not read.done():
            read.cancel()
            await asyncio.gather(read, return_exceptions=True)
    if read.done() and not read.cancelled():
        return read.result()  # a message, EOF, or the stream's error
    return None


def _check(resp: Any, prefix: bytes, resume: int) -> None:
    if resp.compact_revision:
        raise KvError(
            f"etcd watch on {prefix!r} from revision {resume}: history compacted up to "
            f"{resp.compact_revision}",
            retriable=False,
        )
    if resp.canceled:
        raise KvError(
            f"etcd cancelled the watch on {prefix!r}: {resp.cancel_reason}", retriable=False
        )


def _event(ev: Any) -> WatchEvent:
    if ev.type == rpc.Event.DELETE:
        return WatchEvent(WatchEventKind.DELETE, ev.kv.key, b"", ev.kv.mod_revision)
    return WatchEvent(WatchEventKind.PUT, ev.kv.key, ev.kv.value, ev.kv.mod_revision)
