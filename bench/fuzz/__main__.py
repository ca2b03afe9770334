"""``python -m bench.fuzz --target X --count N [--seed S] [--engine atheris]``: N inputs a target.

Two engines: ``mutate`` (the default, no dependency: random mutations of each target's seeds,
what ``make test`` runs briefly) and ``atheris`` (coverage-guided, libFuzzer through the
``atheris`` wheel, one process per target, ``bench.fuzz.guided``). Prints one JSON line a target
(``bench``, ``engine``, ``target``, ``inputs``, ``rejected``, ``crashes``, ``hangs``,
``seconds``; ``atheris`` adds libFuzzer's ``cov``/``ft`` edge and feature counts and the corpus
size) and exits non-zero on a crash (an exception not of our own error type) or a hang (an
input taking more than ``--hang-s``). ``--target all`` runs every target in turn.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from types import FrameType

from bench.fuzz.targets import TARGETS
from tributary.errors import TributaryError


class Hang(Exception):
    pass


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            data[rng.randrange(len(data))] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif op == 2:
            del data[rng.randrange(len(data) + 1) :]
        elif op == 3:
            i = rng.randrange(len(data) + 1)
            data[i:i] = rng.randbytes(rng.randint(1, 16))
        else:
            other = rng.choice(seeds)
            data += other[rng.randrange(len(other) + 1) :]
    return bytes(data)


def run(target: str, count: int, seed: int, hang_s: float) -> dict[str, object]:
    started = time.monotonic()
    fn, seeds = TARGETS[target]
    rng = random.Random(f"{target}:{seed}")
    rejected, crashes, hangs = 0, [], 0

    def alarm(_sig: int, _frame: FrameType | None) -> None:
        raise Hang

    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for _ in range(count):
            data = mutate(rng, seeds)
            signal.setitimer(signal.ITIMER_REAL, hang_s)
            try:
                fn(data)
            except TributaryError:
                rejected += 1
            except Hang:
                hangs += 1
                crashes.append({"input": data.hex(), "error": "hang"})
            except Exception as e:
                where = traceback.format_exc().splitlines()[-3][:200]
                crashes.append({"input": data.hex(), "error": repr(e)[:300], "where": where})
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    return {"bench": "fuzz", "engine": "mutate", "target": target, "inputs": count,
            "rejected": rejected, "crashes": len(crashes) - hangs, "hangs": hangs,
            "seconds": round(time.monotonic() - started, 1), "first": crashes[:3]}  # fmt: skip


_STATS = re.compile(rb"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")


def run_guided(
    target: str, count: int, seed: int, hang_s: float, max_s: int = 0
) -> dict[str, object]:
    """``count`` inputs of libFuzzer's choosing (fewer if ``max_s`` seconds pass first), in a
    process of its own (libFuzzer ends the process)."""
    started = time.monotonic()
    # scratch in memory where the machine has it: reparo_file writes every input to a file, and
    # on a disk the open and write took longer than reparo's reading. The parent removes it
    # (libFuzzer ends the child without running its atexit handlers).
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="tributary-fuzz-", dir=shm) as tmp:
        out = os.path.join(tmp, "figures.json")
        argv = [sys.executable, "-m", "bench.fuzz.guided", target, str(count), str(hang_s)]
        argv += [str(seed), out, str(max_s)]
        env = {**os.environ, "TMPDIR": tmp}  # its corpus and scratch files go with ``tmp``
        proc = subprocess.run(argv, capture_output=True, check=False, env=env)
        try:
            with open(out) as f:
                figures = json.load(f)
        except (OSError, ValueError):
            tail = proc.stderr.decode("utf-8", "replace")[-600:]
            figures = {"inputs": 0, "crashes": 1, "hangs": 0, "first": [{"error": tail}]}
    ran = re.search(rb"stat::number_of_executed_units: *(\d+)", proc.stderr)
    if ran:
        figures["inputs"] = int(ran.group(1))
    stats = _STATS.findall(proc.stderr)
    cov, ft, corpus = (int(x) for x in stats[-1][1:]) if stats else (0, 0, 0)
    return {"bench": "fuzz", "engine": "atheris", "target": target, **figures,
            "seconds": round(time.monotonic() - started, 1), "cov": cov, "ft": ft,
            "corpus": corpus, "exit": proc.returncode}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fuzz")
    p.add_argument("--target", default="all", choices=["all", *TARGETS])
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hang-s", type=float, default=2.0)
    p.add_argument("--engine", default="mutate", choices=["mutate", "atheris"])
    p.add_argument("--max-seconds", type=int, default=0, help="atheris: per target, 0 = none")
    a = p.parse_args(argv)

    logging.disable(logging.WARNING)  # parsers warn about odd input; the line below reports
    bad = False
    for t in TARGETS if a.target == "all" else [a.target]:
        if a.engine == "atheris":
            out = run_guided(t, a.count, a.seed, a.hang_s, a.max_seconds)
        else:
            out = run(t, a.count, a.seed, a.hang_s)
        bad = bad or bool(out["crashes"] or out["hangs"])
        print(json.dumps(out), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
