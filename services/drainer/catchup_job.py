"""Running one catch-up job as a subprocess and reading its progress.

The job is ``python -m services.spark.catchup`` (services never import each other: the drainer
only knows its command line, its JSON progress lines and its exit status). The sink URL goes in
the environment (``CATCHUP_SINK_URL``), never in argv, so a password does not show in ``ps``.
The job's stderr (Spark's log) goes to a file beside the staging directory.

Invariant: the subprocess never outlives the call: a cancelled ``run_job`` kills it and waits
for it, so a drainer that stops mid-job leaves no Spark behind writing to its downstream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

SINK_ENV = "CATCHUP_SINK_URL"  # services.spark.catchup reads the sink URL from it
EXIT_RETRIABLE = 75  # the job's "a rerun may succeed"


@dataclass(frozen=True)
class JobSpec:
    staging: Path
    sink_url: str
    master: str = "local[*]"
    partitions: int = 4
    driver_memory: str = "1g"
    python: str = sys.executable

    def argv(self) -> list[str]:
        return [
            self.python,
            *("-m", "services.spark.catchup"),
            *("--staging", str(self.staging)),
            *("--master", self.master),
            *("--partitions", str(self.partitions)),
            *("--driver-memory", self.driver_memory),
        ]

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, SINK_ENV: self.sink_url}

    @property
    def log_path(self) -> Path:
        return self.staging.with_name(self.staging.name + "-job.log")


def retriable_exit(code: int) -> bool:
    """Exit 75 (the job says a rerun may help) or killed by a signal (negative code)."""
    return code == EXIT_RETRIABLE or code < 0


def parse_line(raw: bytes) -> dict[str, Any]:
    """One stdout line as a JSON object; anything else is kept as ``{"line": text}``."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return {"line": text}
    return value if isinstance(value, dict) else {"line": text}


class JobRunner(Protocol):
    async def __call__(
        self,
        spec: JobSpec,
        on_start: Callable[[int], None],
        on_line: Callable[[dict[str, Any]], None],
    ) -> int: ...


async def run_job(
    spec: JobSpec,
    on_start: Callable[[int], None],
    on_line: Callable[[dict[str, Any]], None],
    *,
    extra_argv: Sequence[str] = (),
) -> int:
    """Run the job to its end; its exit status (negative: killed by that signal)."""
    err = await asyncio.to_thread(open, spec.log_path, "ab")
    try:
        proc = await asyncio.create_subprocess_exec(
            *spec.argv(),
            *extra_argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=spec.env(os.environ),
        )
    finally:
        err.close()
    log.info("catch-up job started (pid %d, log %s)", proc.pid, spec.log_path)
    on_start(proc.pid)
    try:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            if raw.strip():
                on_line(parse_line(raw))
        return await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
            log.warning("catch-up job %d killed: the drainer is stopping", proc.pid)
