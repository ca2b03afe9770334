"""``python -m services.demo`` end to end, as a user runs it: a real etcd, two real pumps, a real
drainer process, the bank and mixed workloads, binlogctl and the consistency checker.

Proves: a short run on the embedded SQLite files exits 0 with the downstream equal to the
upstream, the bank total the same on both sides, the drainer caught up and every process
stopped; the same with both sides on real MariaDB servers (given through the environment),
where leftovers of an earlier demo are dropped first and the data really is on the servers;
Ctrl-C mid-load stops everything cleanly (exit 130, no process left); the demo refuses to wipe
a directory it did not create.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBPair

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 100.0  # seconds; a 4 s run normally takes ~12 s
PROCESSES = {"etcd", "pump-1", "pump-2", "drainer"}


def demo(*args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_DEMO_")}
    return subprocess.Popen(
        [sys.executable, "-m", "services.demo", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**base, **(env or {}), "PYTHONUNBUFFERED": "1"},
    )


def run_demo(*args: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    proc = demo(*args, env=env)
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out


def recorded_pids(data_dir: Path) -> dict[str, int]:
    lines = (data_dir / "demo.pids").read_text().splitlines()
    return {name: int(pid) for pid, name in (line.split(" ", 1) for line in lines)}


def assert_all_gone(data_dir: Path, expected: set[str] = PROCESSES) -> None:
    pids = recorded_pids(data_dir)
    assert set(pids) == expected
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the demo reaped it: no such process


def number(pattern: str, out: str) -> int:
    found = re.search(pattern, out, re.M)
    assert found is not None, (pattern, out)
    return int(found[1])


def assert_passed(out: str) -> None:
    """What every passing run shows, whatever the databases."""
    for step in range(1, 8):
        assert f"[{step}/7]" in out, out
    # the load: progress lines with the drainer's live numbers, then the totals
    lines = re.findall(r"^\s+\d+s\s+\d+\s+(\d+)\s+\d+\s+(\d+|-)\s+(\S+)", out, re.M)
    assert len(lines) >= 2, out
    assert any(lag != "-" for _, _, lag in lines), out  # the lag became known during the load
    assert number(r"done: (\d+) transactions committed", out) > 0
    # the drainer reached the last commit, binlogctl shows the nodes
    assert re.search(r"ok\s+caught up [\d.]+ s after the load ended", out), out
    for node in ("pump-1", "pump-2", "drainer"):
        assert re.search(rf"^\s+{node}\s+127\.0\.0\.1:\d+\s+online\s", out, re.M), (node, out)
    # the consistency report: every table equal, the bank total the opening total on both sides
    checked = number(r"^\s+EQUAL: (\d+) tables checked, 0 differing", out)
    assert checked >= 5  # demo_bank.accounts and mixed's four base tables at least
    assert re.search(r"^\s+demo_bank\.accounts: equal", out, re.M), out
    total = number(r"ok\s+bank total: upstream (\d+), downstream \1, opened with \1$", out)
    assert total == 1000 * 1000
    assert "RESULT: PASS" in out and "FAIL" not in out
    assert "drainer exited with code 0, pump-1 exited with code 0, pump-2 exited with code 0" in out


def test_the_demo_replicates_sqlite_to_sqlite_and_checks_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    code, out = run_demo("--duration", "4", "--writers", "4", "--data-dir", str(data_dir))
    assert code == 0, out
    assert_passed(out)
    assert f"SQLite file {data_dir / 'upstream.db'}" in out
    assert (data_dir / "downstream.db").stat().st_size > 0
    assert_all_gone(data_dir)


def test_the_demo_runs_on_two_mariadb_servers(mariadb_pair: MariaDBPair, tmp_path: Path) -> None:
    up, down = mariadb_pair.upstream, mariadb_pair.downstream
    for server in (up, down):  # what an earlier demo would have left
        server.admin("CREATE DATABASE demo_bank")
        server.admin("CREATE TABLE demo_bank.leftover (id INT PRIMARY KEY)")
    env = {"TRIBUTARY_DEMO_UPSTREAM": up.dsn(), "TRIBUTARY_DEMO_DOWNSTREAM": down.dsn()}
    data_dir = tmp_path / "demo"
    code, out = run_demo("--duration", "4", "--data-dir", str(data_dir), env=env)
    assert code == 0, out
    assert_passed(out)
    assert up.password not in out  # URLs are shown with the password masked
    assert f"127.0.0.1:{up.port}" in out and f"127.0.0.1:{down.port}" in out
    assert out.count("dropped demo_bank on the") == 2
    assert "leftover" not in out  # dropped before the run, so never compared
    assert not (data_dir / "upstream.db").exists() and not (data_dir / "downstream.db").exists()
    # the data really is on the servers, and the same on both
    for server in (up, down):
        ((total,),) = server.admin("SELECT SUM(balance) FROM demo_bank.accounts")
        assert int(total) == 1000 * 1000
    ((checkpoint,),) = down.admin("SELECT COUNT(*) FROM tidb_binlog.checkpoint")
    assert int(checkpoint) == 1  # the drainer's consistent-mode checkpoint row
    assert_all_gone(data_dir)


def test_ctrl_c_during_load_stops_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    proc = demo("--duration", "60", "--writers", "4", "--data-dir", str(data_dir))
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + RUN_TIMEOUT
    try:
        for line in proc.stdout:  # wait for the first progress line of the load
            seen.append(line)
            if re.search(r"^\s+1s\s+\d+\s+\d+", line) or time.monotonic() > deadline:
                break
        assert any(re.search(r"^\s+1s\s", line) for line in seen), "".join(seen)
        proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the demo
        rest, _ = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(seen) + rest
    assert proc.returncode == 130, out
    assert "Interrupted" in out
    assert "[5/7]" not in out and "RESULT" not in out  # nothing after the load ran
    assert re.search(r"done: \d+ transactions committed", out), out  # the writers finished
    assert "drainer exited with code 0, pump-1 exited with code 0, pump-2 exited with code 0" in out
    assert_all_gone(data_dir)


def test_refuses_to_wipe_a_directory_it_did_not_create(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    code, out = run_demo("--duration", "1", "--data-dir", str(tmp_path))
    assert code == 1, out
    assert "is not empty and was not made by the demo" in out
    assert precious.read_text() == "keep me"
    assert not (tmp_path / "demo.pids").exists()  # nothing was started
