"""Child processes of a service, started without running Python in the forked child.

A service runs under uvloop with grpcio's threads (its etcd client) in the same process.
uvloop's ``create_subprocess_exec`` forks and runs Python's at-fork hooks in the child before
``exec`` (``PyOS_AfterFork_Child``); in such a process that child sometimes dies of SIGSEGV a few
milliseconds after it was spawned, before ``exec``, with no output. ``subprocess.Popen`` goes
from ``vfork`` to ``exec`` through async-signal-safe C only and runs no fork handlers, so a
service starts its children with ``Popen`` (on its event loop's thread) and awaits them here:
the exit through a pidfd (Linux), a pipe through a ``StreamReader``.

Invariant: ``exited`` reaps only the process it was given (``waitpid`` on its pid, never -1),
so it does not take another waiter's child.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Sequence
from typing import IO, Any


def start(argv: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **popen)``; call it on the event loop's thread (it returns
    once the child has exec'd, which takes a moment, not a wait on the child)."""
    return subprocess.Popen(list(argv), **popen)


async def exited(proc: subprocess.Popen[bytes]) -> int:
    """Wait for ``proc`` to exit; its return code (negative: the signal that ended it)."""
    code = proc.poll()
    if code is not None:
        return code
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()

    def reap() -> None:
        code = proc.poll()
        if code is not None and not done.done():
            done.set_result(code)

    pidfd = os.pidfd_open(proc.pid)
    loop.add_reader(pidfd, reap)
    try:
        reap()  # it may have exited before the reader was added
        return await done
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


async def reader(pipe: IO[bytes]) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """A ``StreamReader`` over the read end of a child's pipe, and the transport that owns the
    pipe from now on (closed at the pipe's end; close it if you stop reading before)."""
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    return stream, transport
