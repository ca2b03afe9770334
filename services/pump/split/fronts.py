"""The writer process's front processes: started, awaited until they serve, restarted when
one dies, stopped before the storage closes.

Why the writer restarts a dead front but nothing restarts a dead writer: a front holds no
state (a SIGKILLed front loses only calls it had not answered; their writers retry, and the
kernel hands new connections to the fronts still listening), so a new one can simply take
its place. The writer holds the data-dir lock, the storage, the sorter and the pump's etcd
registration; when it dies every front sees its link break, fails what is pending as
retriable and exits, and the pump is restarted as a whole by its supervisor (the kubelet,
systemd), through the same recovery a single-process pump's kill -9 goes through.

A front that exits before it listens (it crashed, or could not bind) is started again, up to
``START_ATTEMPTS`` times in a row, each failure logged with its exit code and the end of its
stderr; only then is it an error (``FrontDied``): at start the pump fails, while it runs the
supervisor fails, which stops the pump, whose own supervisor restarts it.

Invariant: ``start`` returns only when every front listens (each said HELLO on its link), and
after ``stop`` no front of this pump is left running; no front is signalled once reaped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from services.pump.split.child import Child, describe
from services.pump.split.front import SPEC_ENV, FrontSpec

log = logging.getLogger(__name__)

READY_WITHIN = 60.0  # seconds a front may take to start listening
RESTART_DELAY = 0.5  # seconds before a dead front is replaced, or a failed start tried again
START_ATTEMPTS = 3  # starts in a row that may fail before a front's failure is an error
STOP_GRACE = 10.0  # seconds fronts get to finish their calls after SIGTERM


class FrontDied(Exception):
    """A front could not be started (``START_ATTEMPTS`` tries exited before listening)."""


class Fronts:
    def __init__(self, spec: FrontSpec, count: int) -> None:
        self._spec = spec
        self._count = count
        self._procs: dict[int, Child] = {}
        self._ready: dict[int, asyncio.Event] = {}
        self._stopping = False

    @property
    def pids(self) -> list[int]:
        return list(self._procs)

    def hello(self, pid: int) -> None:
        """Called by the front link when front ``pid`` listens."""
        event = self._ready.get(pid)
        if event is not None:
            event.set()

    async def start(self) -> None:
        results = await asyncio.gather(
            *(self._start_one() for _ in range(self._count)), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        log.info("%d front processes serve the port: %s", self._count, self.pids)

    async def _start_one(self) -> None:
        """Start one front; try again after a failed start, ``START_ATTEMPTS`` in all."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                await self._spawn()
                return
            except FrontDied as e:
                if attempt == START_ATTEMPTS or self._stopping:
                    raise FrontDied(f"{e}; gave up after {attempt} attempts") from None
                log.warning("%s; starting another (attempt %d)", e, attempt + 1)
            await asyncio.sleep(RESTART_DELAY)

    async def _spawn(self) -> None:
        env = {**os.environ, SPEC_ENV: self._spec.to_json()}
        proc = Child([sys.executable, "-m", "services.pump.split.front"], env)
        ready = self._ready[proc.pid] = asyncio.Event()
        self._procs[proc.pid] = proc
        waiting = asyncio.ensure_future(ready.wait())
        exited = asyncio.ensure_future(proc.wait())
        try:
            await asyncio.wait(
                {waiting, exited}, timeout=READY_WITHIN, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiting.cancel()
            exited.cancel()
        if ready.is_set():
            return
        late = proc.returncode is None
        proc.kill()  # not listening within READY_WITHIN; a no-op if it exited meanwhile
        code = await proc.wait()
        self._procs.pop(proc.pid, None)
        self._ready.pop(proc.pid, None)
        why = f"not listening after {READY_WITHIN:.0f} s" if late else describe(code)
        output = proc.tail() or "(no output)"
        raise FrontDied(f"front process {proc.pid} did not start ({why}); its stderr: {output}")

    async def supervise(self) -> None:
        """Replace any front that exits while the pump runs (runs until cancelled); raises
        ``FrontDied`` when a replacement cannot be started."""
        while not self._stopping:
            waits = {asyncio.ensure_future(p.wait()): pid for pid, p in self._procs.items()}
            if not waits:
                await self._replace()
                continue
            try:
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            for w in done:
                pid = waits[w]
                self._procs.pop(pid, None)
                self._ready.pop(pid, None)
                if not self._stopping:
                    log.error("front process %d exited (%s)", pid, describe(w.result()))
            await self._replace()

    async def _replace(self) -> None:
        while not self._stopping and len(self._procs) < self._count:
            log.info("starting a front process in place of one that exited")
            await asyncio.sleep(RESTART_DELAY)
            await self._start_one()

    async def stop(self) -> None:
        """SIGTERM every front, wait for them (SIGKILL after ``STOP_GRACE``)."""
        self._stopping = True
        procs = list(self._procs.values())
        for p in procs:
            p.terminate()
        if procs:
            waits = [asyncio.ensure_future(p.wait()) for p in procs]
            await asyncio.wait(waits, timeout=STOP_GRACE)
            for p in procs:
                if p.returncode is None:
                    log.warning("front process %d did not stop; killing it", p.pid)
                    p.kill()
            await asyncio.gather(*(p.wait() for p in procs))
            for w in waits:
                w.cancel()
        self._procs.clear()
