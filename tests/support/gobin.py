"""The Go test programs (tests/go): TiDB's own pump client, PD's own Go client and grpc-go.

Built into a cache by ``make deps`` (scripts/go-test-binaries); the tests only look the directory
up. ``pumpwriter`` writes prewrite/commit pairs through ``tidb-binlog/pump_client`` with
timestamps from PD's client; ``pdcheck`` gets the cluster ID and timestamps with PD's client;
``grpcprobe`` calls methods with grpc-go and prints the status each call saw.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.components import component


def build() -> Path:
    """The directory holding the test programs; missing, the test fails at once."""
    return component("go-test-programs")


def value(rid: int, size: int = 1024) -> str:
    """pumpwriter's ``v`` column for row ``rid`` (its value() in Go)."""
    head = f"row-{rid}:"
    if len(head) >= size:
        return head
    return head + chr(ord("a") + rid % 26) * (size - len(head))


@dataclass
class GoRun:
    proc: asyncio.subprocess.Process
    log: Path

    async def summary(self, within: float) -> dict[str, Any]:
        """Wait for the exit; the last JSON line on stdout is the program's summary."""
        assert self.proc.stdout is not None
        out = await asyncio.wait_for(self.proc.stdout.read(), within)
        code = await self.proc.wait()
        with self.log.open("ab") as log:  # the Go clients' own logs go to stdout
            log.write(out)
        # the Go clients log to stdout too (lines starting with "["); the summary is JSON
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        if code != 0 or not lines:
            stderr = self.log.read_text()[-3000:]
            raise AssertionError(f"exit {code}: {out.decode()[-2000:]} {stderr}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    async def wait_line(self, text: str, within: float) -> None:
        """Read stdout until a line equal to ``text`` (the clients' logs come before it)."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(within):
            while (line := await self.proc.stdout.readline()) != b"":
                if line.decode().strip() == text:
                    return
        raise AssertionError(f"no {text!r} line: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


async def start(bin_dir: Path, program: str, log: Path, *args: str) -> GoRun:
    with log.open("ab") as err:
        proc = await asyncio.create_subprocess_exec(
            str(bin_dir / program),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
        )
    return GoRun(proc, log)
