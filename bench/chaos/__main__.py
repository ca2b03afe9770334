"""``python -m bench.chaos --cycles N --seed S``: run the chaos harness, print one JSON line.

Exit status 0 when no cycle found a violation, 1 otherwise (the violations go to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from bench.chaos.faults import ACTIONS, KAFKA_VICTIMS, NET_VICTIMS, VICTIMS
from bench.chaos.harness import Options, run
from tests.support import netns


def parse(argv: Sequence[str] | None) -> tuple[Options, argparse.Namespace]:
    defaults = Options()
    ap = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    ap.add_argument("--cycles", type=int, default=defaults.cycles)
    ap.add_argument("--seed", type=int, default=None, help="replays a run's choices (random)")
    ap.add_argument(
        "--load-seconds",
        type=float,
        default=defaults.load_seconds,
        help="seconds of load per cycle, the fault somewhere in the first half",
    )
    ap.add_argument("--accounts", type=int, default=defaults.accounts)
    ap.add_argument("--bank-rate", type=float, default=defaults.bank_rate)
    ap.add_argument(
        "--mixed-rate",
        type=float,
        default=defaults.mixed_rate,
        help="steps/s of the mixed workload with DDL; 0 turns it off",
    )
    ap.add_argument("--writers", type=int, default=defaults.writers)
    ap.add_argument(
        "--victims",
        default=None,
        help=f"comma-separated subset of {','.join(VICTIMS)} (default: all of them), and with "
        f"--netns of {','.join(NET_VICTIMS)} (then added to the default)",
    )
    ap.add_argument(
        "--sink-query",
        default=defaults.sink_query,
        help="the drainer's MySQL sink options (consistent=false: what consistent mode prevents)",
    )
    ap.add_argument(
        "--kafka",
        action="store_true",
        help="drainer -> Kafka (exactly once) -> binlog-arbiter -> downstream; adds the victims "
        f"{','.join(KAFKA_VICTIMS)}",
    )
    ap.add_argument(
        "--netns",
        action="store_true",
        help="each pump, etcd member, the drainer and each capture in a network namespace of "
        f"its own (needs root); adds the partition victims {','.join(NET_VICTIMS)}",
    )
    ap.add_argument(
        "--actions", default=",".join(ACTIONS), help="kill, stop or both (not for partitions)"
    )
    ap.add_argument(
        "--work-dir", type=Path, default=None, help="kept afterwards (default: a temp dir)"
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.netns and args.kafka:
        ap.error("--netns and --kafka do not go together yet (the broker stays on 127.0.0.1)")
    if args.netns and (why := netns.unavailable()) is not None:
        ap.error(f"--netns: {why}")
    default = VICTIMS + (NET_VICTIMS if args.netns else ())
    victims = tuple(v for v in (args.victims or ",".join(default)).split(",") if v)
    known = VICTIMS + (KAFKA_VICTIMS if args.kafka else ()) + (NET_VICTIMS if args.netns else ())
    unknown = set(victims) - set(known)
    if unknown or not victims:
        ap.error(f"--victims: unknown {sorted(unknown)}; choose from {','.join(known)}")
    actions = tuple(a for a in args.actions.split(",") if a)
    if not actions or set(actions) - set(ACTIONS):
        ap.error(f"--actions: choose from {','.join(ACTIONS)}")
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1_000_000
    opts = Options(
        cycles=args.cycles,
        seed=seed,
        load_seconds=args.load_seconds,
        accounts=args.accounts,
        bank_rate=args.bank_rate,
        mixed_rate=args.mixed_rate,
        writers=args.writers,
        victims=victims,
        sink_query=args.sink_query,
        kafka=args.kafka,
        actions=actions,
        netns=args.netns,
    )
    return opts, args


async def measure(opts: Options, work_dir: Path | None) -> tuple[dict[str, Any], list[str]]:
    """The JSON figures of a run and its violations. SIGTERM cancels the run, so its clean-up
    (processes, MariaDB servers, namespaces) runs as on any error."""
    run_task = asyncio.current_task()
    assert run_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, run_task.cancel)
    began = time.monotonic()
    if work_dir is not None:
        figures, extra = await run(work_dir, opts)
    else:
        with tempfile.TemporaryDirectory(prefix="tributary-chaos-") as tmp:
            figures, extra = await run(Path(tmp), opts)
    recovery = figures.recovery_s
    return {
        "bench": "chaos",
        "cycles": len(figures.plans),
        "seed": opts.seed,
        "faults": dict(sorted(figures.faults.items())),
        "lost_rows": figures.lost_rows,
        "duplicated_rows": figures.duplicated_rows,
        "different_rows": figures.different_rows,
        **(
            {"kafka_messages": figures.kafka_messages, "kafka_duplicates": figures.kafka_duplicates}
            if opts.kafka
            else {}
        ),
        **extra,
        "max_recovery_s": round(max(recovery), 2) if recovery else None,
        "mean_recovery_s": round(sum(recovery) / len(recovery), 2) if recovery else None,
        "violations": len(figures.violations),
        "wall_s": round(time.monotonic() - began, 1),
        "options": {f.name: getattr(opts, f.name) for f in fields(opts) if f.name != "seed"},
        "plans": figures.plans,
    }, figures.violations


def main(argv: Sequence[str] | None = None) -> int:
    opts, args = parse(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=False)
    try:
        result, violations = asyncio.run(measure(opts, args.work_dir))
    except asyncio.CancelledError:
        print("stopped by SIGTERM (cleaned up)", file=sys.stderr)
        return 128 + signal.SIGTERM
    for v in violations:
        print(f"VIOLATION: {v}", file=sys.stderr)
    print(json.dumps(result), flush=True)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
