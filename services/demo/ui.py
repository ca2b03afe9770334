"""What the demo tells its user: the only module of the demo that prints.

Steps are numbered ``[n/7]``, details indented under them, checks marked ``ok`` / ``FAIL``,
and the run ends with ``RESULT: PASS`` or ``RESULT: FAIL``. Library-like parts of the demo
log instead; their warnings go to stderr. Passwords in URLs are always masked.
"""

from __future__ import annotations

import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from services.demo.cluster import DrainerNode, Etcd, PumpNode
from services.demo.ctl import check_argv, ctl_argv, shown
from services.demo.endpoints import DOWNSTREAM_ENV, UPSTREAM_ENV, Endpoints
from services.demo.load import LoadResult, split
from services.demo.progress import HEADER, Counts, progress_line, rate
from services.demo.verdict import Verdict
from tributary.checker import Report

STEPS = 7
INDENT = "      "


def _p(text: str = "") -> None:
    print(text, flush=True)


def _wrap(text: str) -> None:
    _p(textwrap.fill(text, width=100, subsequent_indent=""))


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _mark(ok: bool) -> str:
    return "  ok  " if ok else " FAIL "


def _where(ends: Endpoints, side: str) -> str:
    path = ends.sqlite_path(side)
    return f"SQLite file {_rel(path)}" if path is not None else ends.shown(side)


class Console:
    def banner(self, duration: float, writers: int, data_dir: Path, ends: Endpoints) -> None:
        bank, mixed = split(writers)
        _p("tributary demo: the whole pipeline on this machine. A workload plays TiDB against an")
        _p("upstream database (each transaction also goes to the pumps as binlogs), a drainer")
        _p("replicates the binlogs into a downstream database, and a checker compares the two.")
        for side, env in (("upstream", UPSTREAM_ENV), ("downstream", DOWNSTREAM_ENV)):
            how = "from" if ends.sqlite_path(side) is None else "MariaDB: set"
            _p(f"  {side:<11} {_where(ends, side)}   ({how} {env})")
        _p(
            f"  load        {duration:g} s, bank ({bank} writers) and mixed ({mixed}); "
            f"processes' data and logs in {_rel(data_dir)}/"
        )

    def step(self, n: int, text: str) -> None:
        _p()
        _p(f"[{n}/{STEPS}] {text}")

    def detail(self, text: str) -> None:
        _p(f"{INDENT}{text}")

    def leftovers(self, stopped: Sequence[str]) -> None:
        if stopped:
            self.detail(f"stopped processes a previous demo left running: {', '.join(stopped)}")

    def cleared(self, ends: Endpoints, side: str, dropped: Sequence[str]) -> None:
        if dropped:
            self.detail(
                f"dropped {', '.join(dropped)} on the {side} ({ends.shown(side)}), "
                "left there by an earlier demo"
            )

    def etcd(self, etcd: Etcd) -> None:
        where = f"data {_rel(etcd.data_dir)}, log {_rel(etcd.child.log_path)}"
        self.detail(f"etcd ready at {etcd.url}  ({where})")

    def pump(self, pump: PumpNode) -> None:
        self.detail(
            f"{pump.name} ready: gRPC {pump.addr}, HTTP {pump.status_url}  "
            f"(log {_rel(pump.child.log_path)})"
        )

    def drainer(self, node: DrainerNode, ends: Endpoints, initial_ts: int) -> None:
        self.detail(f"initial commit ts {initial_ts}: taken from the TSO before any write")
        self.detail(
            f"{node.name} ready: HTTP {node.status_url}, into {_where(ends, 'downstream')}  "
            f"(log {_rel(node.child.log_path)})"
        )

    def setup_done(self, written: Counts, tables: int, accounts: int) -> None:
        self.detail(
            f"set up: {tables} tables, {accounts} bank accounts; {written.commits} transactions "
            f"and {written.ddls} DDLs so far"
        )
        self.detail("counts below include the set-up; applied = transactions and DDLs the")
        self.detail("drainer committed downstream, lag = now - the drainer's saved checkpoint")
        self.detail(HEADER)

    def progress(
        self,
        second: int,
        per_second: float,
        written: Counts,
        applied: int | None,
        lag: float | None,
    ) -> None:
        self.detail(progress_line(second, per_second, written, applied, lag))

    def load_done(self, result: LoadResult, load: Counts) -> None:
        """``load``: what the writers wrote (the set-up left out)."""
        bank, mixed = result.bank, result.mixed
        self.detail(
            f"done: {load.commits} transactions committed in {result.elapsed:.1f} s "
            f"({rate(load.commits, result.elapsed):.0f} txn/s), {load.ddls} DDLs, "
            f"{load.rows} rows written"
        )
        self.detail(
            f"      {bank.retries + mixed.retries} retried after a conflict, "
            f"{bank.rollbacks + mixed.rollbacks} rolled back after the prewrite, "
            f"{bank.aborted + mixed.aborted} dropped by a DDL, "
            f"{bank.failures + mixed.failures} given up"
        )
        if result.error:
            self.detail(f"{_mark(False)} a writer failed: {result.error}")
        self.detail(f"last commit ts written: {result.max_commit_ts}")

    def command_output(self, argv: Sequence[str], code: int, output: str) -> None:
        self.detail(f"$ {shown(argv)}")
        for line in output.rstrip().splitlines():
            self.detail(f"  {line}")
        if code != 0:
            self.detail(f"(exited with code {code})")

    def caught_up(self, reached: bool, waited: float, checkpoint: int | None, target: int) -> None:
        if reached:
            self.detail(
                f"{_mark(True)} caught up {waited:.1f} s after the load ended: "
                f"checkpoint {checkpoint}"
            )
        else:
            self.detail(
                f"{_mark(False)} the checkpoint is still at {checkpoint} after {waited:.0f} s, "
                f"below {target}: the downstream is not complete"
            )

    def drainer_gone(self, message: str) -> None:
        first, *rest = message.splitlines() or [""]
        self.detail(f"{_mark(False)} the drainer stopped: {first}")
        for line in rest:
            self.detail(f"       {line}")

    def report(self, report: Report) -> None:
        for line in report.render_text().splitlines():
            self.detail(line)

    def not_compared(self, why: str) -> None:
        self.detail(f"not compared: {why}")

    def totals(self, v: Verdict) -> None:
        up, down = v.upstream_total, v.downstream_total
        self.detail(
            f"{_mark(v.totals_ok)} bank total: upstream {up}, downstream {down}, "
            f"opened with {v.expected_total}"
        )

    def check_error(self, message: str) -> None:
        self.detail(f"{_mark(False)} {message}")

    def result(self, v: Verdict, written: Counts, data_dir: Path) -> None:
        _p()
        if v.ok:
            tables = len(v.report.tables) if v.report is not None else 0
            _wrap(
                f"RESULT: PASS: {written.commits} transactions and {written.ddls} DDLs went "
                f"through the pumps and the drainer; the downstream equals the upstream "
                f"({tables} tables, row by row) and the bank holds {v.expected_total} on both "
                f"sides."
            )
        else:
            _wrap(f"RESULT: FAIL: {'; '.join(v.reasons())}.")
            _p(f"(the processes' logs are in {_rel(data_dir)}/*.log)")

    def keep(
        self, etcd: Etcd, pumps: Sequence[PumpNode], drainer: DrainerNode, ends: Endpoints
    ) -> None:
        ctl = shown(ctl_argv())
        _p()
        _p("Everything keeps running (--keep). Try, in another terminal:")
        _p(f"  {ctl} pumps --pd-urls {etcd.url}")
        _p(f"  {ctl} drainers --pd-urls {etcd.url}")
        _p(f"  curl {drainer.status_url}/status          # the drainer's view of each pump")
        _p(f"  curl {drainer.status_url}/commit_ts       # its saved checkpoint")
        _p(f"  curl -s {pumps[0].status_url}/metrics | grep ^binlog_pump")
        for side in ("upstream", "downstream"):
            path = ends.sqlite_path(side)
            if path is not None:
                _p(f"  sqlite3 {_rel(path)} .tables")
        up, down = ends.shown("upstream"), ends.shown("downstream")
        _p(f"  {shown(check_argv())} -u {up} -d {down} --tables 'demo_bank.*,demo_mixed.*'")
        if "******" in up + down:
            _p("  (passwords are masked above)")
        _p("Press Ctrl-C to stop everything.")

    def stopping(self) -> None:
        _p()
        _p("Stopping: the drainer, then the pumps (SIGTERM: they pause gracefully), then etcd")

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
