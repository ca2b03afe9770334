"""The drainer's pull: binlogs per second and per CPU second out of real pumps, by implementation.

Setup: etcd and two pumps as real processes (``DemoCluster``); a backlog of ``--rows`` row
changes (the drainer benchmark's mix: half in transactions of 1-10 rows, half in 100-row
inserts) written through the pump client. Each measurement is a fresh process, as a drainer
is, that pulls both pumps' whole backlog from the start with the drainer's ``Puller`` into
its merge inboxes, uvloop and the drainer's GC settings, until each puller has passed its
pump's max commit ts. Reported per implementation: binlogs/s and rows/s (wall clock), the
pulling process's CPU seconds and binlogs per CPU second (the figure to compare on a shared
machine), the pumps' CPU seconds meanwhile; the median of ``--rounds`` rounds, the
implementations taking turns within a round.

Implementations:
- ``grpclib``: the drainer's ``Puller`` (``services.drainer.pullchannel``: grpclib, the
  responses that arrived together taken at once, each read into views, 16 MiB windows);
- ``ceiling``: ``pull_messages`` alone on the same streams, nothing decoded, nothing queued:
  what the transport alone costs, so ``grpclib_to_ceiling`` is the share left to the
  drainer's own work;
- ``stock``: grpclib's own ``recv_message``, one await per response, with a codec that returns
  the bytes as they are (the same channel settings, nothing decoded): what
  ``pull_messages``'s reading saves.

A first, unreported pass with the grpclib puller warms the pumps' page cache and counts the
messages each pump streams up to its max commit ts (the ceiling reads exactly as many).

Prints one JSON line (``drainer_pull``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import aiohttp
import uvloop
from grpclib.client import Channel
from grpclib.const import Cardinality

from bench.bench_drainer import backlog_values, cpu_seconds
from bench.upstream import open_upstream, write_all
from services.demo.cluster import DemoCluster
from services.demo.procs import Supervisor
from services.drainer.feed import INBOX_SIZE, Inbox
from services.drainer.pullchannel import CONFIG, PULL_PATH, pull_messages
from services.drainer.puller import Puller
from tributary.net import split_host_port
from tributary.servicekit.gctune import relax_gc
from tributary.wire.binlog import Pos, PullBinlogReq

IMPLS = ("grpclib", "ceiling", "stock")


class RawCodec:
    """Messages as bytes, both ways: what grpclib costs with nothing decoded."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


# --- the pulling process --------------------------------------------------------------------


async def pull_with_pullers(
    pumps: list[dict[str, Any]], cluster_id: int, from_ts: int
) -> tuple[int, list[int]]:
    """Pull every pump through ``Puller``s until each passed its ``until``; (bytes, counts)."""
    wake = asyncio.Event()
    inboxes = [Inbox(wake, INBOX_SIZE) for _ in pumps]
    pullers = [
        Puller(p["name"], p["addr"], cluster_id, from_ts, inbox)
        for p, inbox in zip(pumps, inboxes, strict=True)
    ]
    counts = [0] * len(pumps)
    size = 0
    untils = [p["until"] for p in pumps]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(p.run(), name=f"bench-pull-{p.node_id}") for p in pullers]
        while True:
            wake.clear()
            done = all(p.last_ts >= u for p, u in zip(pullers, untils, strict=True))
            for i, inbox in enumerate(inboxes):
                while (item := inbox.take()) is not None:
                    if item.commit_ts <= untils[i]:
                        counts[i] += 1
                        size += len(item.payload)
            if done:
                break
            await wake.wait()
        for t in tasks:
            t.cancel()
    return size, counts


async def pull_bare(
    pumps: list[dict[str, Any]], cluster_id: int, from_ts: int
) -> tuple[int, list[int]]:
    """Read each pump's first ``count`` messages with ``pull_messages``, nothing decoded."""

    async def one(p: dict[str, Any]) -> int:
        host, port = split_host_port(p["addr"])
        request = PullBinlogReq(cluster_id=cluster_id, start_from=Pos(offset=from_ts))
        got = size = 0
        async with aclosing(pull_messages(host, port, request)) as stream:
            async for batch in stream:
                for message in batch[: p["count"] - got]:
                    size += len(message)
                    got += 1
                if got >= p["count"]:
                    break
        return size

    sizes = await asyncio.gather(*(one(p) for p in pumps))
    return sum(sizes), [p["count"] for p in pumps]


async def pull_stock(
    pumps: list[dict[str, Any]], cluster_id: int, from_ts: int
) -> tuple[int, list[int]]:
    """Read each pump's first ``count`` messages with grpclib's ``recv_message``."""

    async def one(p: dict[str, Any]) -> int:
        host, port = split_host_port(p["addr"])
        request = PullBinlogReq(cluster_id=cluster_id, start_from=Pos(offset=from_ts))
        got = size = 0
        channel = Channel(host, port, codec=RawCodec(), config=CONFIG)  # type: ignore[arg-type]
        try:
            async with channel.request(
                PULL_PATH, Cardinality.UNARY_STREAM, PullBinlogReq, bytes
            ) as stream:
                await stream.send_message(request, end=True)
                while got < p["count"] and (message := await stream.recv_message()):
                    size += len(message)
                    got += 1
                await stream.cancel()
        finally:
            channel.close()
        return size

    sizes = await asyncio.gather(*(one(p) for p in pumps))
    return sum(sizes), [p["count"] for p in pumps]


async def child_main(
    impl: str, pumps: list[dict[str, Any]], cluster_id: int, from_ts: int
) -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    if impl == "ceiling":
        size, counts = await pull_bare(pumps, cluster_id, from_ts)
    elif impl == "stock":
        size, counts = await pull_stock(pumps, cluster_id, from_ts)
    else:
        size, counts = await pull_with_pullers(pumps, cluster_id, from_ts)
    return {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "bytes": size,
        "counts": counts,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child(args: argparse.Namespace) -> None:
    relax_gc()
    pumps = json.loads(args.pumps)
    run = child_main(args.child, pumps, args.cluster_id, args.from_ts)
    if args.profile:
        with cProfile.Profile() as prof:
            result = uvloop.run(run)
        prof.dump_stats(f"{args.profile}/{args.child}.prof")
    else:
        result = uvloop.run(run)
    print(json.dumps(result))


# --- the benchmark --------------------------------------------------------------------------


async def run_child(
    impl: str,
    pumps: list[dict[str, Any]],
    cluster_id: int,
    from_ts: int,
    pump_pids: list[int],
    profile: str | None = None,
) -> dict[str, Any]:
    argv = [
        sys.executable,
        *("-m", "bench.bench_pull", "--child", impl),
        *("--pumps", json.dumps(pumps), "--cluster-id", str(cluster_id)),
        *("--from-ts", str(from_ts)),
        *(("--profile", profile) if profile else ()),
    ]
    pumps_cpu0 = sum(cpu_seconds(pid) for pid in pump_pids)
    proc = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the {impl} pull exited with {proc.returncode}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    result["pumps_cpu_s"] = sum(cpu_seconds(pid) for pid in pump_pids) - pumps_cpu0
    return result


async def pump_backlog(status_url: str, after: int) -> int:
    """The pump's max commit ts once it holds everything written (``/backlog``)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{status_url}/backlog", params={"after": str(after)}) as resp:
            resp.raise_for_status()
            return int((await resp.json())["max_commit_ts"])


async def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    async with DemoCluster(work, Supervisor(work)) as cluster:
        etcd = await cluster.start_etcd()
        await cluster.start_pumps(2)
        async with open_upstream(etcd.url) as up:
            cluster_id = up.cluster_id
            first = await up.tso.get_ts()
            values = backlog_values(1, args.rows, args.seed)
            await write_all(up, values)
        pumps = [
            {
                "name": p.name,
                "addr": p.addr,
                "until": await pump_backlog(p.status_url, first),
            }
            for p in cluster.pumps
        ]
        pids = [p.child.pid for p in cluster.pumps]
        warm = await run_child("grpclib", pumps, cluster_id, first, pids)
        for p, n in zip(pumps, warm["counts"], strict=True):
            p["count"] = n
        results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in args.impls}
        for r in range(args.rounds):
            order = args.impls[r % len(args.impls) :] + args.impls[: r % len(args.impls)]
            for impl in order:
                got = await run_child(impl, pumps, cluster_id, first, pids, args.profile)
                if got["counts"] != warm["counts"]:
                    raise RuntimeError(f"{impl} pulled {got['counts']}, expected {warm['counts']}")
                results[impl].append(got)
    binlogs = sum(warm["counts"])
    out: dict[str, Any] = {
        "bench": "drainer_pull",
        "row_changes": args.rows,
        "binlogs": binlogs,
        "mib": round(warm["bytes"] / (1 << 20), 1),
        "rounds": args.rounds,
    }
    for impl, runs in results.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        out[impl] = {
            "binlogs_per_s": round(binlogs / wall),
            "rows_per_s": round(args.rows / wall),
            "cpu_s": round(cpu, 2),
            "binlogs_per_cpu_s": round(binlogs / cpu),
            "pumps_cpu_s": round(statistics.median(r["pumps_cpu_s"] for r in runs), 2),
            "peak_rss_mib": round(statistics.median(r["peak_rss_mib"] for r in runs), 1),
        }
    return out


def add_ratios(out: dict[str, Any], impl: str, base: str) -> None:
    if impl in out and base in out:
        a, b = out[impl], out[base]
        out[f"{impl}_to_{base}_rate"] = round(a["binlogs_per_s"] / b["binlogs_per_s"], 3)
        out[f"{impl}_to_{base}_per_cpu_s"] = round(
            a["binlogs_per_cpu_s"] / b["binlogs_per_cpu_s"], 3
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--impls", type=lambda s: s.split(","), default=list(IMPLS))
    ap.add_argument("--profile", metavar="DIR", help="write each pull's cProfile stats here")
    ap.add_argument("--child", choices=IMPLS, help=argparse.SUPPRESS)
    ap.add_argument("--pumps", help=argparse.SUPPRESS)
    ap.add_argument("--cluster-id", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--from-ts", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory(prefix="bench-pull-") as tmp:
        out = uvloop.run(measure(Path(tmp), args))
    add_ratios(out, "grpclib", "ceiling")
    add_ratios(out, "ceiling", "stock")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
