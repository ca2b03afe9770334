"""``python -m services.demo`` end to end, as a user runs it: a real etcd, two real
pump processes, the load generator, binlogctl and the verification.

Proves: a short run exits 0 with every check passing and the pumps shown by
binlogctl; Ctrl-C mid-load stops everything cleanly (exit 130, no process
left); the demo refuses to wipe a directory it did not create.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.etcd, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 100.0  # seconds; a run normally takes ~15 s


def demo(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.demo", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def recorded_pids(data_dir: Path) -> dict[str, int]:
    lines = (data_dir / "demo.pids").read_text().splitlines()
    return {name: int(pid) for pid, name in (line.split(" ", 1) for line in lines)}


def assert_all_gone(pids: dict[str, int]) -> None:
    assert set(pids) == {"etcd", "pump-1", "pump-2"}
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the demo reaped it: no such process


def number(pattern: str, out: str) -> int:
    found = re.search(pattern, out)
    assert found is not None, (pattern, out)
    return int(found[1])


def test_demo_runs_and_verifies_every_commit(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    proc = demo("--duration", "3", "--writers", "8", "--data-dir", str(data_dir))
    out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, out

    for step in range(1, 6):
        assert f"[{step}/5]" in out, out
    assert re.search(r"TSO leader: pump-[12] \(127\.0\.0\.1:\d+\)", out), out
    # binlogctl, run as a separate process, lists both pumps online
    assert re.search(r"^\s+pump-1\s+127\.0\.0\.1:\d+\s+online\s", out, re.M), out
    assert re.search(r"^\s+pump-2\s+127\.0\.0\.1:\d+\s+online\s", out, re.M), out

    acked = number(r"RESULT: PASS: all (\d+) acknowledged commits verified", out)
    committed = number(r"done: \d+ transactions .*: (\d+) committed", out)
    assert acked == committed > 0
    assert f"ok   {acked} of {acked} acknowledged commits found exactly once" in out
    served = [number(rf"{pump} served (\d+) commits", out) for pump in ("pump-1", "pump-2")]
    assert sum(served) == acked
    assert min(served) > 0  # the client spread the load over both pumps
    for check in (
        "no rolled-back or unknown transaction was served",
        "each came back with the commit ts it was committed at",
        "each pump's stream was in commit-ts order",
        "identical to the rows written",
        "same as the writers' books",
    ):
        assert re.search(rf"^\s+ok\s+.*{re.escape(check)}", out, re.M), (check, out)
    assert "FAIL" not in out
    assert "pump-1 exited with code 0, pump-2 exited with code 0" in out
    assert_all_gone(recorded_pids(data_dir))


def test_ctrl_c_during_load_stops_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    proc = demo("--duration", "60", "--writers", "4", "--data-dir", str(data_dir))
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + RUN_TIMEOUT
    try:
        for line in proc.stdout:  # wait for the first progress line of the load
            seen.append(line)
            if re.search(r"^\s+1s\s+\d+ txn/s", line) or time.monotonic() > deadline:
                break
        assert any("txn/s" in line for line in seen), "".join(seen)
        proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the demo
        rest, _ = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(seen) + rest
    assert proc.returncode == 130, out
    assert "Interrupted" in out
    assert "[4/5]" not in out  # nothing after the load ran
    assert re.search(r"done: \d+ transactions", out), out  # the writers finished cleanly
    assert "pump-1 exited with code 0, pump-2 exited with code 0" in out
    assert_all_gone(recorded_pids(data_dir))


def test_refuses_to_wipe_a_directory_it_did_not_create(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    proc = demo("--duration", "1", "--data-dir", str(tmp_path))
    out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 1, out
    assert "is not empty and was not made by the demo" in out
    assert precious.read_text() == "keep me"
    assert not (tmp_path / "demo.pids").exists()  # nothing was started
