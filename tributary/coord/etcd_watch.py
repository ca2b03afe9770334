"""One etcd watch as an async generator of ``WatchEvent``, surviving stream breaks.

Invariant: events come once each, in revision order. ``resume`` is always the
revision after the last one delivered (or after the revision the watch was
created at), so a re-opened stream neither repeats nor skips anything.

Example: the consumer got revisions 7 and 9; etcd restarts; meanwhile 10 and 11
are written. The stream breaks with UNAVAILABLE, we wait 0.1 s, 0.2 s, ... and
re-open from 10: the consumer gets 10 and 11, then live events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

import grpc  # type: ignore[import-untyped]
from aetcd import rpc

from tributary.coord.etcd_grpc import finish_stream, mapped_error, open_stream, range_end
from tributary.coord.kv import KvError, WatchEvent, WatchEventKind

log = logging.getLogger(__name__)

_MIN_DELAY = 0.1  # seconds before the first re-watch; doubles up to the max
_MAX_DELAY = 2.0


async def watch_events(
    stub: Any,
    metadata: Any,
    prefix: bytes,
    start_revision: int,
    is_closed: Callable[[], bool],
    live: set[object],
) -> AsyncGenerator[WatchEvent, None]:
    """Follow ``prefix`` from ``start_revision``. The watch is in ``live`` from its
    first step until it has wound down (stream ended and settled)."""
    token = object()
    live.add(token)
    resume = start_revision  # 0: from the revision the watch is created at
    delay = _MIN_DELAY
    try:
        while True:
            if is_closed():
                raise KvError("etcd watch stopped: client is closed", retriable=False)
            call = open_stream(stub.Watch(metadata=metadata))
            try:
                create = rpc.WatchCreateRequest(
                    key=prefix, range_end=range_end(prefix), start_revision=resume
                )
                await call.write(rpc.WatchRequest(create_request=create))
                while True:
                    resp = await call.read()
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
                if not err.retriable or is_closed():
                    raise err from e
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
            delay = min(delay * 2, _MAX_DELAY)
    finally:
        live.discard(token)


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
