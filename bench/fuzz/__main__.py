"""``python -m bench.fuzz --target X --count N [--seed S]``: mutate each target's seeds N times.

Prints one JSON line (``bench``, ``target``, ``inputs``, ``rejected``, ``crashes``, ``hangs``)
and exits non-zero on a crash (an exception not of our own error type) or a hang (an input
taking more than ``--hang-s``). ``--target all`` runs every target.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import sys
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
    return {"bench": "fuzz", "target": target, "inputs": count, "rejected": rejected,
            "crashes": len(crashes) - hangs, "hangs": hangs, "first": crashes[:3]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fuzz")
    p.add_argument("--target", default="all", choices=["all", *TARGETS])
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hang-s", type=float, default=2.0)
    a = p.parse_args(argv)
    logging.disable(logging.WARNING)  # parsers warn about odd input; the line below reports
    bad = False
    for t in TARGETS if a.target == "all" else [a.target]:
        out = run(t, a.count, a.seed, a.hang_s)
        bad = bad or bool(out["crashes"] or out["hangs"])
        print(json.dumps(out), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
