"""Small drainer parts: settings with drainer.toml's keys, the downstream URL, the node
state machine, and turning a pulled entity into an item."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.drainer.cli import main
from services.drainer.errors import MalformedPayload
from services.drainer.item import PulledBinlogItem
from services.drainer.puller import read_item, to_item
from services.drainer.state import Action, DrainerState, StateError
from tributary.config.drainer import DrainerConfig
from tributary.registry.status import NodeState
from tributary.settings import SettingsError, load
from tributary.sinks.urls import redact
from tributary.wire.binlog import Binlog, BinlogType, Entity, Meta, PullBinlogResp

DRAINER_TOML = """
addr = "127.0.0.1:18249"
advertise-addr = "drainer-0.example:18249"
detect-interval = 10
data-dir = "data.drainer"
pd-urls = "http://127.0.0.1:2379,http://127.0.0.2:2379"
compressor = ""
initial-commit-ts = 449812345678901249
synced-check-time = 5
node-id = "drainer-0"

[security]
ssl-ca = ""
ssl-cert = ""
ssl-key = ""

[syncer]
sink-uri = "blackhole://"
"""


def test_drainer_toml_keys_load(tmp_path: Path) -> None:
    path = tmp_path / "drainer.toml"
    path.write_text(DRAINER_TOML)
    cfg = load(
        DrainerConfig, ["--config", str(path)], {"DRAINER_CACHE_BINLOG_COUNT": "16"}, "DRAINER"
    )
    assert cfg.listen.addr == "127.0.0.1:18249"
    assert cfg.listen.advertise == "drainer-0.example:18249"
    assert cfg.detect_interval == 10.0
    assert cfg.pd_urls == ("http://127.0.0.1:2379", "http://127.0.0.2:2379")
    assert cfg.initial_commit_ts == 449812345678901249
    assert (cfg.node_id, cfg.syncer.sink_uri, cfg.cache_binlog_count) == (
        "drainer-0",
        "blackhole://",
        16,
    )
    defaults = DrainerConfig()
    assert (defaults.initial_commit_ts, defaults.heartbeat_interval) == (-1, 1.0)
    assert (defaults.checkpoint_interval, defaults.detect_interval) == (3.0, 5.0)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as e:
        load(
            DrainerConfig,
            ["--compressor", "gzip", "--initial-commit-ts", "-5", "--advertise-addr", "0.0.0.0:1"],
            {},
            "DRAINER",
        )
    text = str(e.value)
    for key in ("compressor", "initial-commit-ts", "advertise-addr"):
        assert key in text


def test_cli_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-such-flag"]) == 2
    assert "binlog-drainer" in capsys.readouterr().err


def test_downstream_url_from_db_type_and_syncer_to(tmp_path: Path) -> None:
    toml = tmp_path / "drainer.toml"
    toml.write_text(
        '[syncer]\ndb-type = "mysql"\n[syncer.to]\nhost = "db.example"\nport = 3307\n'
        'user = "rep"\npassword = "p@ss:w/rd"\nconsistent = false\n'
    )
    cfg = load(DrainerConfig, ["--config", str(toml)], {}, "DRAINER")
    url = cfg.syncer.sink_url("data")
    assert url == "mysql://rep:p%40ss%3Aw%2Frd@db.example:3307/?consistent=false"
    assert redact(url) == "mysql://rep:******@db.example:3307/?consistent=false"
    assert DrainerConfig().syncer.sink_url("d") == "mysql://root@127.0.0.1:3306/?consistent=true"
    by_kind = {
        kind: load(DrainerConfig, ["--syncer-db-type", kind], {}, "DRAINER").syncer.sink_url(
            str(tmp_path)
        )
        for kind in ("file", "sqlite", "print")
    }
    assert by_kind == {
        "file": f"file://{tmp_path}?retention-time=0",
        "sqlite": f"sqlite://{tmp_path}/downstream.db",
        "print": "print://",
    }
    kafka = tmp_path / "kafka.toml"
    kafka.write_text(
        '[syncer]\ndb-type = "kafka"\n[syncer.to]\nkafka-addrs = "k1:9092,k2:9092"\n'
        'kafka-version = "2.4.0"\nkafka-max-messages = 10\nkafka-max-message-size = 2048\n'
    )
    assert load(DrainerConfig, ["--config", str(kafka)], {}, "DRAINER").syncer.sink_url("d") == (
        "kafka://k1:9092,k2:9092/?kafka-version=2.4.0&kafka-max-messages=10"
        "&kafka-max-message-size=2048&kafka-client-id=tidb_binlog"
    )
    explicit = load(DrainerConfig, ["--syncer-sink-uri", "blackhole://"], {}, "DRAINER")
    assert explicit.syncer.sink_url("d") == "blackhole://"


def test_filters_and_batches_from_drainer_toml(tmp_path: Path) -> None:
    toml = tmp_path / "drainer.toml"
    toml.write_text(
        "[syncer]\n"
        'replicate-do-db = ["shop", "~^crm_"]\n'
        "ignore-txn-commit-ts = [449812345678901249]\n"
        "txn-batch = 10\nworker-count = 4\n"
        '[[syncer.ignore-table]]\ndb-name = "shop"\ntbl-name = "~^tmp_"\n'
    )
    cfg = load(DrainerConfig, ["--config", str(toml)], {}, "DRAINER")
    f = cfg.syncer.table_filter()
    assert f.allows("SHOP", "orders") and f.allows("crm_eu", "users")
    assert not f.allows("shop", "tmp_x") and not f.allows("mysql", "user")
    assert cfg.syncer.ignore_txn_commit_ts == (449812345678901249,)
    assert cfg.syncer.effective_batch_rows() == 120
    with pytest.raises(SettingsError, match="syncer"):
        load(DrainerConfig, ["--syncer-replicate-do-db", "~("], {}, "DRAINER")


def test_state_machine() -> None:
    s = DrainerState()
    assert s.request(Action.PAUSE) is NodeState.PAUSING and s.exit.is_set()
    with pytest.raises(StateError, match="pausing"):
        s.request(Action.CLOSE)
    assert s.final() is NodeState.PAUSED
    c = DrainerState()
    c.request(Action.CLOSE)
    c.stopping()  # a signal during close does not turn it into a pause
    assert c.final() is NodeState.OFFLINE
    sig = DrainerState()
    sig.stopping()
    assert (sig.state, sig.final()) == (NodeState.PAUSING, NodeState.PAUSED)


def entity(payload: bytes, commit_ts: int = 0) -> PullBinlogResp:
    return PullBinlogResp(entity=Entity(payload=payload, meta=Meta(commit_ts=commit_ts)))


def test_to_item_reads_the_header_and_refuses_garbage() -> None:
    commit = bytes(
        Binlog(tp=BinlogType.Commit, start_ts=5, commit_ts=7, prewrite_value=b"row")  # type: ignore[arg-type]
    )
    assert to_item("p", entity(commit)) == PulledBinlogItem(7, 5, commit, False)
    fake = bytes(Binlog(tp=BinlogType.Rollback, start_ts=9, commit_ts=9))  # type: ignore[arg-type]
    assert to_item("p", entity(fake)).is_fake
    with pytest.raises(MalformedPayload, match=r"pump p .*commit ts 42"):
        to_item("p", entity(b"\xff\xff\xff", commit_ts=42))
    # The same from the marshalled response, as the puller reads it.
    assert read_item("p", bytes(entity(commit))) == PulledBinlogItem(7, 5, commit, False)
    assert read_item("p", bytes(entity(fake))).is_fake
    with pytest.raises(MalformedPayload, match=r"pump p .*commit ts 42"):
        read_item("p", bytes(entity(b"\xff\xff\xff", commit_ts=42)))
    with pytest.raises(MalformedPayload, match="unreadable PullBinlogResp"):
        read_item("p", b"\x0a\x7f\x12")  # the entity runs past the end
