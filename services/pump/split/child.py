"""One front process as the writer sees it: started, awaited, signalled, its stderr relayed.

Started with ``subprocess.Popen`` on the event loop's thread, not with
``asyncio.create_subprocess_exec``. Under uvloop the latter forks and runs Python's at-fork
hooks in the child before ``exec`` (``PyOS_AfterFork_Child``), in a writer that has grpcio's
threads running (its etcd client); such a child can crash before it reaches ``exec`` (SIGSEGV,
no output, gone a few milliseconds after it was spawned). CPython's ``subprocess`` goes from
``vfork`` to ``exec`` through async-signal-safe C only and runs no fork handlers. The thread
matters too: a front asks for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), and for
Linux that parent is the thread that forked, so a front spawned from a worker thread would be
killed when that thread ends. The loop's thread lives as long as the pump.

The exit is awaited through a pidfd (Linux, as the front link's abstract socket names are), and
the front's stderr is copied line by line to the writer's, the last lines kept, so a front that
fails says why in the pump's log and in the error that reports it.

Invariant: a signal is only sent to a front not yet reaped (a reaped pid may be reused), and
``wait`` returns once the front is reaped and its stderr read to the end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Mapping, Sequence

TAIL_LINES = 20  # lines of a front's stderr kept for the error that reports its exit
OUTPUT_AFTER_EXIT = 1.0  # seconds the rest of an exited front's stderr may take to arrive


class Child:
    """A started front process. Create it on the event loop's thread."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self._loop = asyncio.get_running_loop()
        self._proc = subprocess.Popen(
            list(argv), env=dict(env), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.pid = self._proc.pid
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._partial = b""
        self._exited: asyncio.Future[int] = self._loop.create_future()
        self._drained: asyncio.Future[None] = self._loop.create_future()
        assert self._proc.stderr is not None
        self._err = self._proc.stderr
        os.set_blocking(self._err.fileno(), False)
        self._loop.add_reader(self._err.fileno(), self._read_stderr)
        self._pidfd = os.pidfd_open(self.pid)
        self._loop.add_reader(self._pidfd, self._reap)

    @property
    def returncode(self) -> int | None:
        """The exit code once reaped (negative: the signal that ended it), else None."""
        return self._proc.returncode

    def tail(self) -> str:
        """The last lines the front wrote to stderr."""
        return "\n".join(self._tail)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self._proc.returncode is None:
            self._proc.send_signal(sig)  # polls first; a process gone meanwhile is not an error

    async def wait(self) -> int:
        """The exit code, once the front is reaped and its stderr read (or given up on)."""
        code = await asyncio.shield(self._exited)
        if not self._drained.done():
            try:
                async with asyncio.timeout(OUTPUT_AFTER_EXIT):
                    await asyncio.shield(self._drained)
            except TimeoutError:
                pass  # something else holds the pipe open; what arrived is enough
        return code

    def _reap(self) -> None:
        code = self._proc.poll()
        if code is None:
            return
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        if not self._exited.done():
            self._exited.set_result(code)

    def _read_stderr(self) -> None:
        try:
            data = os.read(self._err.fileno(), 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._relay(data)
            return
        self._loop.remove_reader(self._err.fileno())
        self._err.close()
        if self._partial:
            self._relay(b"\n")
        if not self._drained.done():
            self._drained.set_result(None)

    def _relay(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        if not lines:
            return
        text = [line.decode(errors="replace") for line in lines]
        self._tail.extend(text)
        try:
            sys.stderr.write("".join(f"{line}\n" for line in text))
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # our own stderr is gone; the tail is still kept


def describe(code: int) -> str:
    """``exit 1``, or ``killed by SIGSEGV`` for a negative return code."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"
