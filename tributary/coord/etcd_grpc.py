"""gRPC plumbing under ``coord.etcd``: error mapping, key ranges, stream hygiene.

Invariant: a gRPC failure becomes a ``KvError`` whose ``retriable`` follows the
status code only (never the message text), and a streaming call we end leaves
no gRPC-internal task behind once ``finish_stream`` returns.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc  # type: ignore[import-untyped]

from tributary.coord.kv import KvError

RETRIABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
    }
)
CHANNEL_OPTIONS = {
    "grpc.max_reconnect_backoff_ms": 2000,  # find a restarted etcd quickly
    "grpc.keepalive_time_ms": 10_000,  # detect a dead peer under a long watch;
    "grpc.keepalive_timeout_ms": 5_000,  # etcd accepts pings every >= 5 s
}
_SETTLE_TIMEOUT = 1.0  # seconds to wait for ended streams to settle


def mapped_error(what: str, e: grpc.aio.AioRpcError) -> KvError:
    code = e.code()
    return KvError(
        f"etcd {what} failed: {code.name}: {e.details()}", retriable=code in RETRIABLE_CODES
    )


@contextmanager
def mapping(what: str) -> Iterator[None]:
    """Turn gRPC failures inside the block into KvError."""
    try:
        yield
    except grpc.aio.AioRpcError as e:
        raise mapped_error(what, e) from e
    except grpc.aio.UsageError as e:
        raise KvError(f"etcd {what} failed: client is closed", retriable=False) from e


def range_end(prefix: bytes) -> bytes:
    """The exclusive end of the key range holding every key that starts with ``prefix``.

    Example: b"/a/" -> b"/a0" ("/" + 1 is "0"); b"a\\xff" -> b"b"; b"" -> b"\\0" (all keys).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


# grpc.aio gives every streaming call an internal task that waits for the call's
# final status; after a local cancel it ends on its own a moment later (when the
# gRPC core reports back, typically well under a millisecond). We wait for those
# tasks, bounded, so that ending a watch or closing the client leaves no task
# behind. Streams still open (ours or another client's) keep theirs.
_open_streams: weakref.WeakSet[Any] = weakref.WeakSet()
_STATUS_TASK = "_AioCall._handle_status_once_received"


def open_stream(call: Any) -> Any:
    _open_streams.add(call)
    return call


async def finish_stream(call: Any) -> None:
    """End a streaming call (cancelling it if still open) and let gRPC settle it."""
    call.cancel()
    _open_streams.discard(call)
    await settle()


async def settle(also: Callable[[], bool] = lambda: True) -> None:
    """Wait (bounded) until ended streams have settled and ``also()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _SETTLE_TIMEOUT
    while loop.time() < deadline:
        if also() and _pending_status_tasks() <= sum(1 for c in _open_streams if not c.done()):
            return
        await asyncio.sleep(0.001)


def _pending_status_tasks() -> int:
    return sum(
        1
        for t in asyncio.all_tasks()
        if not t.done() and getattr(t.get_coro(), "__qualname__", "") == _STATUS_TASK
    )
