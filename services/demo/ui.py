"""What the demo tells its user: the only module of the demo that prints.

Steps are numbered ``[n/5]``, details indented under them, checks marked
``ok`` / ``FAIL``, and the run ends with ``RESULT: PASS`` or ``RESULT: FAIL``.
Library-like parts of the demo log instead; their warnings go to stderr.
"""

from __future__ import annotations

import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from pumpclient import ClientStats
from services.demo.cluster import Etcd, PumpNode
from services.demo.ctl import shown
from services.demo.loadgen import LoadStats
from services.demo.verify import Verdict

STEPS = 5
INDENT = "      "


def _p(text: str = "") -> None:
    print(text, flush=True)


def _wrap(text: str) -> None:
    print(textwrap.fill(text, width=100), flush=True)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _mark(ok: bool) -> str:
    return "  ok  " if ok else " FAIL "


class Console:
    def banner(self, duration: float, writers: int, data_dir: Path) -> None:
        _p("tributary demo: a private pump cluster, bank transactions through the pump client,")
        _p("and a check that every acknowledged commit comes back out of the pumps.")
        _p(f"({writers} writers for {duration:g} s; everything lives in {_rel(data_dir)}/)")

    def step(self, n: int, text: str) -> None:
        _p()
        _p(f"[{n}/{STEPS}] {text}")

    def detail(self, text: str) -> None:
        _p(f"{INDENT}{text}")

    def leftovers(self, stopped: Sequence[str]) -> None:
        if stopped:
            self.detail(f"stopped processes a previous demo left running: {', '.join(stopped)}")

    def etcd(self, etcd: Etcd) -> None:
        where = f"data {_rel(etcd.data_dir)}, log {_rel(etcd.child.log_path)}"
        self.detail(f"etcd ready at {etcd.url}  ({where})")

    def pump(self, pump: PumpNode) -> None:
        self.detail(
            f"{pump.name} ready: gRPC {pump.addr}, HTTP {pump.status_url}  "
            f"(log {_rel(pump.child.log_path)})"
        )

    def progress(self, second: int, rate: float, load: LoadStats, client: ClientStats) -> None:
        self.detail(
            f"{second:>4}s {rate:>7.0f} txn/s   total {load.txns:>7}   commits {load.commits:>7}"
            f"   rollbacks {load.rollbacks:>5}   batch RPCs {client.batch_rpcs:>6}"
        )

    def load_done(self, load: LoadStats, client: ClientStats, elapsed: float) -> None:
        rate = load.txns / elapsed if elapsed > 0 else 0.0
        self.detail(
            f"done: {load.txns} transactions in {elapsed:.1f} s ({rate:.0f} txn/s): "
            f"{load.commits} committed, {load.rollbacks} rolled back, {load.failures} abandoned"
        )
        per_rpc = client.batched_binlogs / client.batch_rpcs if client.batch_rpcs else 0.0
        self.detail(
            f"pump client: {client.batch_rpcs} batch RPCs carried {client.batched_binlogs} "
            f"binlogs ({per_rpc:.1f} per RPC), {client.unary_rpcs} unary RPCs"
        )
        self.detail(
            f"             {client.prewrites_ok} P-binlogs and {client.commits_ok} C-binlogs "
            f"acknowledged; {client.rpc_errors} RPC errors, {client.retries} retries"
        )
        if client.prewrites_failed or client.commits_failed:
            self.detail(
                f"             {client.prewrites_failed} P-binlogs refused, "
                f"{client.commits_failed} C-binlogs given up"
            )

    def command_output(self, argv: Sequence[str], code: int, output: str) -> None:
        self.detail(f"$ {shown(argv)}")
        for line in output.rstrip().splitlines():
            self.detail(f"  {line}")
        if code != 0:
            self.detail(f"(binlogctl exited with code {code})")

    def verdict(self, v: Verdict) -> None:
        for name, n in v.per_pump.items():
            self.detail(f"{name} served {n} commits (and {v.fakes[name]} fake binlogs)")
        for error in v.feed_errors:
            self.detail(f"{_mark(False)} {error}")
        found = not v.missing and not v.duplicates and v.found_once == v.acked
        self.detail(
            f"{_mark(found)} {v.found_once} of {v.acked} acknowledged commits found exactly once"
            + _examples(", missing", v.missing)
            + _examples(", served twice", v.duplicates)
        )
        self.detail(
            f"{_mark(not v.unexpected)} no rolled-back or unknown transaction was served"
            + _examples(": served", v.unexpected)
        )
        self.detail(
            f"{_mark(not v.wrong_commit_ts)} each came back with the commit ts it was committed at"
            + _examples(", wrong", v.wrong_commit_ts)
        )
        self.detail(
            f"{_mark(not v.backwards)} each pump's stream was in commit-ts order"
            + (f" ({v.backwards} steps backwards)" if v.backwards else "")
        )
        self.detail(
            f"{_mark(not v.wrong_rows)} {v.rows_decoded} rows decoded with tidbcodec, "
            "identical to the rows written"
        )
        for problem in v.wrong_rows[:5]:
            self.detail(f"       {problem}")
        replay_ok = not v.replay_error and v.books_match
        self.detail(
            f"{_mark(replay_ok)} replayed in commit-ts order, they rebuild the bank: "
            f"{len(v.replayed.balances)} accounts, {v.replayed.total} in total"
            + (", same as the writers' books" if v.books_match else ", NOT the writers' books")
        )
        if v.replay_error:
            self.detail(f"       {v.replay_error}")

    def result(self, v: Verdict, load: LoadStats, client: ClientStats, leader: str) -> None:
        _p()
        if v.ok:
            _p(f"RESULT: PASS: all {v.acked} acknowledged commits verified")
        else:
            _p("RESULT: FAIL: the pumps did not give back exactly what was acknowledged")
        _wrap(
            f"What ran: {load.txns} transactions took start and commit timestamps from the TSO "
            f"leader inside {leader} and went to the pumps as P/C binlog pairs through the pump "
            f"client ({client.batch_rpcs} batched RPCs): {load.commits} committed, "
            f"{load.rollbacks} rolled back."
        )
        _wrap(
            "What it shows: pulled back like a drainer (PullBinlogs from commit ts 0, merged by "
            "commit ts), the pumps "
            + (
                "returned every acknowledged commit exactly once, in commit order, with its rows "
                "intact, and no rolled-back transaction."
                if v.ok
                else "did NOT return exactly the acknowledged commits; see the FAIL lines above."
            )
        )

    def keep(
        self, etcd: Etcd, pumps: Sequence[PumpNode], ctl: Sequence[str], start_ts: int
    ) -> None:
        ctl_cmd = shown(ctl)
        _p()
        _p("The cluster keeps running (--keep). Try, in another terminal:")
        _p(f"  {ctl_cmd} pumps --pd-urls {etcd.url}")
        _p(f"  curl {pumps[0].status_url}/status")
        _p(f"  curl {pumps[0].status_url}/metrics | grep binlog")
        if start_ts:
            _p(f"  curl {pumps[0].status_url}/debug/binlog/{start_ts}   # a P-binlog, rows decoded")
        _p(f"  {ctl_cmd} pause-pump --node-id {pumps[-1].name} --pd-urls {etcd.url}")
        _p("     (a paused pump's process ends, as in tidb-binlog; the record stays 'paused')")
        _p("Press Ctrl-C to stop everything.")

    def stopping(self) -> None:
        _p()
        _p("Stopping: pumps first (SIGTERM: they pause gracefully), then etcd")

    def stopped(self, codes: dict[str, int]) -> None:
        self.detail(", ".join(_exit(name, code) for name, code in codes.items()))

    def interrupted(self) -> None:
        _p()
        _p("Interrupted: stopping everything (press Ctrl-C again to kill at once)")

    def error(self, text: str) -> None:
        print(f"demo failed: {text}", file=sys.stderr, flush=True)


def _exit(name: str, code: int) -> str:
    if code < 0:
        try:
            return f"{name} ended by {signal.Signals(-code).name}"
        except ValueError:
            return f"{name} ended by signal {-code}"
    return f"{name} exited with code {code}"


def _examples(label: str, items: Sequence[int]) -> str:
    if not items:
        return ""
    shown_items = ", ".join(str(i) for i in items[:5])
    more = f" and {len(items) - 5} more" if len(items) > 5 else ""
    return f"{label}: start ts {shown_items}{more}"
