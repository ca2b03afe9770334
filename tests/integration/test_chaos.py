"""The chaos harness (``python -m bench.chaos``), short form: five cycles, one per victim kind
(a pump, the drainer, the downstream MariaDB, the TSO leader, an etcd member; each SIGKILLed or
SIGSTOPped at a random moment and brought back), run as a user runs it. It must exit 0 (no lost,
duplicated or different row, no half transaction seen downstream, no TSO regression) and print
its JSON line with the figures. A second, short case runs the capture cluster's victims (a
capture, the capture owner) with the bank and mixed workloads: the capture downstream ends
equal and no two captures own the cluster at once. A third runs ``--netns`` with the partition
faults only (each node in a network namespace of its own; a pump cut from etcd, the drainer cut
from a pump, a capture and the capture owner cut from etcd and the other captures): nothing
lost, one owner and one TSO leader at a time, the cut pump refused prewrites; the mixed workload
runs there too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import netns
from tests.support.kafka import jars

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
CYCLES = 5
VICTIMS = {"pump", "drainer", "downstream", "tso_leader", "etcd"}


def _chaos(argv: list[str]) -> dict[str, Any]:
    """``python -m bench.chaos`` as a user runs it: it must exit 0; its JSON line, parsed."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.chaos", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_five_chaos_cycles_lose_nothing(mariadb_template: Path, tmp_path: Path) -> None:
    """(``mariadb_template`` only makes sure MariaDB is installed before the clock runs.)"""
    argv = ["--cycles", str(CYCLES), "--seed", "5", "--work-dir", str(tmp_path / "chaos")]
    argv += ["--victims", ",".join(sorted(VICTIMS))]
    result = _chaos(argv)
    assert result["bench"] == "chaos" and result["seed"] == 5
    assert result["cycles"] == CYCLES
    assert {kind.rsplit("_", 1)[0] for kind in result["faults"]} == VICTIMS
    assert sum(result["faults"].values()) == CYCLES
    assert result["lost_rows"] == result["duplicated_rows"] == result["different_rows"] == 0
    assert result["half_txns_seen"] == 0 and result["ts_regressions"] == 0
    assert result["bank_samples"] > 0 and result["commits"] > 0
    assert result["max_recovery_s"] is not None
    assert result["violations"] == 0


def test_kafka_path_survives_sigkills_of_drainer_arbiter_and_broker(
    mariadb_template: Path, tmp_path: Path
) -> None:
    """``--kafka``: bank + mixed with DDL -> pumps -> drainer -> a real Kafka broker (exactly
    once) -> binlog-arbiter -> MariaDB; the drainer, the arbiter and the broker each SIGKILLed
    once mid-load. The checker finds every table equal, and the topic, read as a read_committed
    consumer, holds no transaction twice."""
    jars()  # the broker's jars (make deps), looked up before the clock runs
    argv = ["--kafka", "--victims", "drainer,arbiter,broker", "--actions", "kill"]
    argv += ["--cycles", "3", "--seed", "7", "--work-dir", str(tmp_path / "chaos")]
    result = _chaos(argv)
    assert result["faults"] == {"arbiter_kill": 1, "broker_kill": 1, "drainer_kill": 1}
    assert result["lost_rows"] == result["duplicated_rows"] == result["different_rows"] == 0
    assert result["kafka_duplicates"] == 0 and result["kafka_messages"] >= result["commits"]
    assert result["half_txns_seen"] == 0 and result["commits"] > 0
    assert result["violations"] == 0


def test_capture_victims_lose_nothing_and_never_share_the_owner(
    mariadb_template: Path, tmp_path: Path
) -> None:
    argv = ["--cycles", "2", "--seed", "2", "--victims", "capture,capture_owner"]
    argv += ["--work-dir", str(tmp_path / "chaos")]
    result = _chaos(argv)
    assert {kind.rsplit("_", 1)[0] for kind in result["faults"]} == {"capture", "capture_owner"}
    assert result["lost_rows"] == result["duplicated_rows"] == result["different_rows"] == 0
    assert result["owner_samples"] > 0 and result["owner_overlaps"] == 0
    assert result["violations"] == 0


def test_partitions_lose_nothing_and_split_nothing(mariadb_template: Path, tmp_path: Path) -> None:
    """``--netns`` with the four partition faults, one cycle each (seed 11 deals them all), with
    the bank and mixed workloads: a capture cut from etcd stops writing (its lease fence) before
    its tables move, so the mixed workload's DDL is applied once and the changefeed stays up."""
    assert netns.unavailable() is None, netns.unavailable()  # the machine runs tests as root
    victims = {"pump_etcd", "drainer_pump", "capture_etcd", "owner_etcd"}
    argv = ["--netns", "--cycles", "4", "--seed", "11", "--victims", ",".join(sorted(victims))]
    argv += ["--work-dir", str(tmp_path / "chaos")]
    result = _chaos(argv)
    assert result["faults"] == {f"{v}_partition": 1 for v in victims}
    assert result["lost_rows"] == result["duplicated_rows"] == result["different_rows"] == 0
    assert result["half_txns_seen"] == 0 and result["ts_regressions"] == 0
    assert result["tso_leader_rounds"] > 0 and result["tso_leader_overlaps"] == 0
    assert result["owner_samples"] > 0 and result["owner_overlaps"] == 0
    assert result["pump_refusals"] == 1  # the pump cut from etcd refused a prewrite
    assert result["violations"] == 0
