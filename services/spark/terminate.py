"""SIGTERM for a job's process: stop its Spark session from a thread of its own.

A Python signal handler runs in the main thread between bytecodes, but a job's main thread
spends its time blocked in a py4j call (a ``collect`` waiting for executors, say), and a signal
the kernel hands to another thread never interrupts that call. So the signal only writes to a
wake-up socket (``signal.set_wakeup_fd``, done by the C-level handler whichever thread runs
it); the thread ``catchup-sigterm`` reads it and stops the session over a py4j connection of its
own: the JVM cancels the running jobs (the main thread's call returns with an error) and, in
k8s mode, deletes the executor pods. A SIGTERM that arrives while the session is still being
built is remembered; ``attach`` reports it once the session is up, so the caller stops it then.

Invariant: once ``requested`` is set, the session is stopped by this thread or by the caller
right after ``attach``, never left running.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from types import TracebackType
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class StopOnSigterm:
    """``with StopOnSigterm() as guard: spark = ...; if guard.attach(spark): stop``."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._lock = threading.Lock()
        self._spark: SparkSession | None = None
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)
        self._thread = threading.Thread(target=self._watch, name="catchup-sigterm", daemon=True)
        self._old_fd = -1
        self._old_handler: Any = None

    def __enter__(self) -> StopOnSigterm:
        self._old_handler = signal.signal(signal.SIGTERM, _ignore)
        self._old_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        signal.set_wakeup_fd(self._old_fd)
        signal.signal(signal.SIGTERM, self._old_handler)
        self._writer.close()  # the watcher reads EOF and ends
        self._thread.join(timeout=30)
        self._reader.close()

    def attach(self, spark: SparkSession) -> bool:
        """The session is up; True if a SIGTERM came already (the caller stops it)."""
        with self._lock:
            self._spark = spark
        return self.requested.is_set()

    def _watch(self) -> None:
        while True:
            try:
                got = self._reader.recv(64)
            except OSError:
                return
            if not got:
                return
            if signal.SIGTERM in got:
                break
        self.requested.set()
        with self._lock:
            spark = self._spark
        if spark is not None:
            log.warning("SIGTERM: stopping the Spark session")
            stop_quietly(spark)


def stop_quietly(spark: SparkSession) -> None:
    """``spark.stop()``; a second stop racing the first (the main thread's) is harmless."""
    try:
        spark.stop()
    except Exception as e:
        log.info("stopping the session again: %s", e)


def _ignore(signum: int, frame: object) -> None:
    """The Python-level handler: the work is done by the watcher thread."""
