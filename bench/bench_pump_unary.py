"""The pump's unary write path as TiDB drives it: TiDB's own pump client, 64 writers, 1 KB rows.

``tests/go/pumpwriter`` (``tidb-binlog/pump_client`` with PD's Go client for timestamps) runs in
its own process, pointed at a binlog-tso (it answers PD's protocol and relays etcd): each writer
takes a start ts, writes a prewrite (one inserted row, a 1 KB value), takes a commit ts, writes
the commit. The same run drives, one after the other:

1. a bare grpclib server (``bench.bare_pump``: answers WriteBinlog, decodes and stores nothing,
   the ceiling of one grpclib process on this machine), registered in etcd as the only pump;
2. one real pump in a single process (``front-processes = 1``; fsync on, no embedded TSO: its
   timestamps come from the binlog-tso);
3. one real pump with its front processes (``--fronts``, default one per CPU), the pump the
   figures without a prefix are about.

Prints one JSON line: binlogs/s, pair p50/p99 (prewrite + commit, timestamps excluded) and
CPU-seconds per 10k binlogs (from ``/proc/<pid>/stat``, every thread of the pump's process and
of its front processes) of each, the peak RSS of the pump's biggest process, and the ratios of
the pump to the bare server and to the single-process pump. The machine is shared: the ratios
and CPU per binlog are the figures to compare between runs, not the raw rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

from services.demo.cluster import DemoCluster
from services.demo.procs import Child, Supervisor, free_port, free_port_pair
from tests.support.components import ComponentMissing, component
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus, node_key
from tributary.tso.pd_client import get_members
from tributary.wire import ts as tso

REPO = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
READY_WITHIN = 60.0


def go_binaries() -> Path:
    """The directory holding the pumpwriter (``make deps`` builds it)."""
    try:
        return component("go-test-programs")
    except ComponentMissing as e:
        raise SystemExit(str(e)) from None


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree(pid: int) -> list[int]:
    """``pid`` and its child processes (a pump's front processes)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [pid, *(int(c) for c in path.read_text().split())] if path.exists() else [pid]


def tree_cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except FileNotFoundError:
            pass
    return total


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def wait_until(check: Any, what: str, child: Child) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        child.check_alive()
        try:
            if await check():
                return
        except (OSError, aiohttp.ClientError, TimeoutError):
            pass
        await asyncio.sleep(0.1)
    raise SystemExit(f"{what} not ready within {READY_WITHIN:.0f} s; see {child.log_path}")


async def listening(port: int) -> bool:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()
    return True


async def run_writer(go_bin: Path, tso_url: str, args: argparse.Namespace, log: Path) -> Any:
    """One pumpwriter run; its JSON summary."""
    argv = [
        str(go_bin / "pumpwriter"),
        f"-pd-urls={tso_url}",
        f"-writers={args.writers}",
        f"-duration={args.seconds}s",
        f"-value-size={args.value_bytes}",
        "-table-id=1",
        "-schema-version=1",
    ]
    with log.open("ab") as err:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=err
        )
        out, _ = await proc.communicate()
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"pumpwriter exited {proc.returncode}: {out.decode()[-2000:]}")
    return json.loads(lines[-1])


async def measured(pid: int, run: Any) -> tuple[Any, float]:
    """(the pumpwriter's summary, CPU-seconds of ``pid`` and its children during it)."""
    pids = tree(pid)
    before = tree_cpu_seconds(pids)
    summary = await run
    return summary, tree_cpu_seconds(pids) - before


def figures(summary: Any, cpu: float) -> dict[str, float]:
    binlogs = summary["binlogs"]
    return {
        "per_s": binlogs / summary["elapsed_s"],
        "p50": summary["pair_p50_ms"],
        "p99": summary["pair_p99_ms"],
        "cpu_per_10k": cpu / binlogs * 10_000 if binlogs else 0.0,
        "failures": summary["failures"],
    }


async def measure(root: Path, go_bin: Path, args: argparse.Namespace) -> dict[str, Any]:
    sup = Supervisor(root)
    try:
        async with DemoCluster(root, sup) as cluster, aiohttp.ClientSession() as http:
            etcd = await cluster.start_etcd()
            tso_port = free_port()
            tso_child = sup.start(
                "tso",
                [sys.executable, "-m", "services.tso", "--pd-urls", etcd.url,
                 "--addr", f"127.0.0.1:{tso_port}", "--log-level", "warn"],
                root / "tso.log",
            )  # fmt: skip
            tso_url = f"http://127.0.0.1:{tso_port}"

            async def leader() -> bool:
                return (await get_members(tso_url)).leader is not None

            await wait_until(leader, "binlog-tso", tso_child)

            # 1. the bare grpclib server, registered as the only (online) pump
            bare_port = free_port()
            bare = sup.start(
                "bare",
                [sys.executable, "-m", "bench.bare_pump", "--addr", f"127.0.0.1:{bare_port}"],
                root / "bare.log",
            )
            await wait_until(lambda: listening(bare_port), "bare server", bare)
            async with EtcdKv.connect([etcd.url]) as kv:
                status = NodeStatus(
                    "bare-grpclib",
                    f"127.0.0.1:{bare_port}",
                    NodeState.ONLINE,
                    update_ts=tso.from_seconds(time.time()),
                )
                await NodeRegistry(kv).update(NodeKind.PUMP, status)
                bare_sum, bare_cpu = await measured(
                    bare.pid, run_writer(go_bin, tso_url, args, root / "writer-bare.log")
                )
                await bare.stop(5)
                await kv.delete(node_key(NodeKind.PUMP, "bare-grpclib"))

            # 2. one real pump in one process, 3. the same with its front processes
            single = await run_pump(sup, root, etcd.url, tso_url, go_bin, args, http, 1)
            tso_before = cpu_seconds(tso_child.pid)
            split = await run_pump(sup, root, etcd.url, tso_url, go_bin, args, http, args.fronts)
            tso_cpu = cpu_seconds(tso_child.pid) - tso_before
        return {
            "bare": figures(bare_sum, bare_cpu),
            "single": single,
            "pump": split,
            "tso_cpu_per_10k": tso_cpu / max(split["binlogs"], 1) * 10_000,
        }
    finally:
        sup.kill_all()


async def run_pump(
    sup: Supervisor,
    root: Path,
    etcd_url: str,
    tso_url: str,
    go_bin: Path,
    args: argparse.Namespace,
    http: aiohttp.ClientSession,
    fronts: int,
) -> dict[str, Any]:
    """One real pump (``front-processes = fronts``; 0: one per CPU) driven by the pumpwriter:
    its figures, its process count and the peak RSS of its biggest process."""
    port = free_port_pair()
    name = f"pump-f{fronts}"
    pump = sup.start(
        name,
        [sys.executable, "-m", "services.pump",
         "--addr", f"127.0.0.1:{port}", "--status-addr", f"127.0.0.1:{port + 1}",
         "--data-dir", str(root / name), "--pd-urls", etcd_url, "--node-id", name,
         "--embedded-tso", "false", "--gen-binlog-interval", "1",
         "--front-processes", str(fronts),
         "--storage-stop-write-at-available-space", "64MiB", "-L", "warn"],
        root / f"{name}.log",
    )  # fmt: skip

    async def ready() -> bool:
        async with http.get(f"http://127.0.0.1:{port + 1}/ready") as resp:
            return resp.status == 200

    await wait_until(ready, "pump", pump)
    summary, cpu = await measured(
        pump.pid, run_writer(go_bin, tso_url, args, root / f"writer-{name}.log")
    )
    pids = tree(pump.pid)
    rss = max(peak_rss_mib(p) for p in pids)
    async with EtcdKv.connect([etcd_url]) as kv:
        await pump.stop(10)
        await kv.delete(node_key(NodeKind.PUMP, name))  # the next pump writes alone
    return {**figures(summary, cpu), "binlogs": summary["binlogs"], "procs": len(pids), "rss": rss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--writers", type=int, default=64)
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument(
        "--fronts", type=int, default=0, help="the pump's front-processes (0: one per CPU)"
    )
    args = ap.parse_args()
    go_bin = go_binaries()
    with tempfile.TemporaryDirectory(prefix="bench-unary-") as tmp:
        r = uvloop.run(measure(Path(tmp), go_bin, args))
    pump, bare, single = r["pump"], r["bare"], r["single"]
    print(
        json.dumps(
            {
                "bench": "pump_unary",
                "writers": args.writers,
                "value_bytes": args.value_bytes,
                "seconds": args.seconds,
                "binlogs_per_s": round(pump["per_s"]),
                "pair_p50_ms": pump["p50"],
                "pair_p99_ms": pump["p99"],
                "pump_cpu_s_per_10k": round(pump["cpu_per_10k"], 3),
                "pump_failures": pump["failures"],
                "pump_processes": pump["procs"],
                "pump_peak_rss_mib": round(pump["rss"], 1),
                "grpclib_bare_per_s": round(bare["per_s"]),
                "bare_pair_p50_ms": bare["p50"],
                "bare_pair_p99_ms": bare["p99"],
                "bare_cpu_s_per_10k": round(bare["cpu_per_10k"], 3),
                "ratio_to_bare": round(pump["per_s"] / bare["per_s"], 3),
                "cpu_ratio_to_bare": round(pump["cpu_per_10k"] / bare["cpu_per_10k"], 3),
                "single_binlogs_per_s": round(single["per_s"]),
                "single_pair_p99_ms": single["p99"],
                "single_cpu_s_per_10k": round(single["cpu_per_10k"], 3),
                "single_peak_rss_mib": round(single["rss"], 1),
                "ratio_to_single": round(pump["per_s"] / single["per_s"], 3),
                "tso_cpu_s_per_10k": round(r["tso_cpu_per_10k"], 3),
                "loadavg_1m": round(os.getloadavg()[0], 1),
                "target_binlogs_per_s": 10000,
            }
        )
    )


if __name__ == "__main__":
    main()
