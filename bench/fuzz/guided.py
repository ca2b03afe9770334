"""The coverage-guided engine of ``bench.fuzz`` (``--engine atheris``): libFuzzer through atheris.

One target per process (libFuzzer ends the process when its run is over):
``python -m bench.fuzz.guided TARGET COUNT HANG_S SEED OUT [MAX_S]`` (stop after ``MAX_S`` seconds
if the count is not reached by then; 0: no limit). The product's modules are imported
under atheris' bytecode instrumentation, the target's seeds are the starting corpus, and
libFuzzer keeps each input that reaches new edges. Every input is judged as in the mutation
engine (an error of our own type is a rejection, anything else a crash, longer than ``HANG_S``
a hang) and the process goes on after a finding; the figures go to ``OUT`` as JSON, rewritten
every 1,000 inputs, after a finding and after the last one (libFuzzer's own count of the
inputs it ran is the one reported).
"""

from __future__ import annotations

import atexit
import json
import logging
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from types import FrameType

import atheris

with atheris.instrument_imports(include=["tributary", "services", "bench.fuzz"]):
    from bench.fuzz.targets import TARGETS
    from tributary.errors import TributaryError


class Hang(Exception):
    pass


def main() -> None:
    target, count, hang_s, seed, out = sys.argv[1:6]
    max_s = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    fn, seeds = TARGETS[target]
    total, hang = int(count), float(hang_s)
    figures: dict[str, object] = {"inputs": 0, "rejected": 0, "crashes": 0, "hangs": 0}
    found: list[dict[str, str]] = []

    def save() -> None:
        Path(out).write_text(json.dumps({**figures, "first": found[:3]}))

    def alarm(_sig: int, _frame: FrameType | None) -> None:
        raise Hang

    def one(data: bytes) -> None:
        figures["inputs"] = n = int(figures["inputs"]) + 1  # type: ignore[call-overload]
        signal.setitimer(signal.ITIMER_REAL, hang)
        try:
            fn(data)
        except TributaryError:
            figures["rejected"] = int(figures["rejected"]) + 1  # type: ignore[call-overload]
        except Hang:
            figures["hangs"] = int(figures["hangs"]) + 1  # type: ignore[call-overload]
            found.append({"input": data.hex(), "error": "hang"})
            save()
        except Exception as e:
            figures["crashes"] = int(figures["crashes"]) + 1  # type: ignore[call-overload]
            where = traceback.format_exc().splitlines()[-3][:200]
            found.append({"input": data.hex(), "error": repr(e)[:300], "where": where})
            save()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if n % 1_000 == 0 or n == total:
            save()

    atexit.register(save)
    corpus = Path(tempfile.mkdtemp(prefix=f"tributary-fuzz-{target}-"))
    for i, s in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(s)
    max_len = max(4096, 2 * max(len(s) for s in seeds))
    logging.disable(logging.WARNING)
    signal.signal(signal.SIGALRM, alarm)
    args = [
        sys.argv[0],
        f"-runs={total}",
        f"-seed={int(seed) + 1}",
        "-timeout=0",
        f"-max_total_time={max_s}",
    ]
    args += [f"-max_len={max_len}", "-print_final_stats=1", str(corpus)]
    atheris.Setup(args, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
