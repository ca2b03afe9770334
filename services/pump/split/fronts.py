"""The writer process's front processes: started, awaited until they serve, restarted when
one dies, stopped before the storage closes.

Why the writer restarts a dead front but nothing restarts a dead writer: a front holds no
state (a SIGKILLed front loses only calls it had not answered; their writers retry, and the
kernel hands new connections to the fronts still listening), so a new one can simply take
its place. The writer holds the data-dir lock, the storage, the sorter and the pump's etcd
registration; when it dies every front sees its link break, fails what is pending as
retriable and exits, and the pump is restarted as a whole by its supervisor (the kubelet,
systemd), through the same recovery a single-process pump's kill -9 goes through.

Invariant: ``start`` returns only when every front listens (each said HELLO on its link), and
after ``stop`` no front of this pump is left running.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from services.pump.split.front import SPEC_ENV, FrontSpec

log = logging.getLogger(__name__)

READY_WITHIN = 60.0  # seconds a front may take to start listening
RESTART_DELAY = 0.5  # seconds before a dead front is replaced
STOP_GRACE = 10.0  # seconds fronts get to finish their calls after SIGTERM


class FrontDied(Exception):
    """A front exited before it was ready."""


class Fronts:
    def __init__(self, spec: FrontSpec, count: int) -> None:
        self._spec = spec
        self._count = count
        self._procs: dict[int, asyncio.subprocess.Process] = {}
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
        await asyncio.gather(*(self._spawn() for _ in range(self._count)))
        log.info("%d front processes serve the port: %s", self._count, self.pids)

    async def _spawn(self) -> None:
        env = {**os.environ, SPEC_ENV: self._spec.to_json()}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "services.pump.split.front",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
        )
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
        if not ready.is_set():
            proc.kill()
            await proc.wait()
            del self._procs[proc.pid]
            raise FrontDied(f"front process {proc.pid} did not start (exit {proc.returncode})")

    async def supervise(self) -> None:
        """Replace any front that exits while the pump runs (runs until cancelled)."""
        while True:
            waits = {asyncio.ensure_future(p.wait()): pid for pid, p in self._procs.items()}
            if not waits:
                await asyncio.sleep(RESTART_DELAY)
                continue
            try:
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            for w in done:
                pid = waits[w]
                code = self._procs.pop(pid).returncode
                self._ready.pop(pid, None)
                if self._stopping:
                    continue
                log.error("front process %d exited (%s); starting another", pid, code)
                await asyncio.sleep(RESTART_DELAY)
                try:
                    await self._spawn()
                except FrontDied as e:
                    log.error("%s; trying again", e)

    async def stop(self) -> None:
        """SIGTERM every front, wait for them (SIGKILL after ``STOP_GRACE``)."""
        self._stopping = True
        procs = list(self._procs.values())
        for p in procs:
            if p.returncode is None:
                p.terminate()
        if not procs:
            return
        await asyncio.wait([asyncio.ensure_future(p.wait()) for p in procs], timeout=STOP_GRACE)
        for p in procs:
            if p.returncode is None:
                log.warning("front process %d did not stop; killing it", p.pid)
                p.kill()
                await p.wait()
        self._procs.clear()
