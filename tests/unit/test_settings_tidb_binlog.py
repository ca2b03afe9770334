"""tidb-binlog's own files and flags: the stock pump.toml and drainer.toml load, Go-style flags
as tidb-operator passes them parse, known-but-ignored keys warn once, unknown keys stay errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from services.binlogctl.cli import parse as parse_ctl
from services.binlogctl.config import Command
from tributary.config.drainer import DrainerConfig
from tributary.config.pump import PumpConfig
from tributary.servicekit.net import advertise_for, default_ip
from tributary.settings import IgnoredSetting, SettingsError, load

STOCK = Path(__file__).resolve().parents[1] / "data" / "tidb-binlog-v8.1.2"
PUMP_TOML = str(STOCK / "pump.toml")
DRAINER_TOML = str(STOCK / "drainer.toml")


def load_pump(argv: list[str], env: dict[str, str] | None = None) -> tuple[PumpConfig, list[str]]:
    ignored: list[IgnoredSetting] = []
    cfg = load(PumpConfig, argv, env or {}, "PUMP", ignored=ignored)
    return cfg, [n.key for n in ignored]


def load_drainer(argv: list[str]) -> tuple[DrainerConfig, list[IgnoredSetting]]:
    ignored: list[IgnoredSetting] = []
    cfg = load(DrainerConfig, argv, {}, "DRAINER", ignored=ignored)
    return cfg, ignored


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- the stock files ----------------------------------------------------------------------


def test_stock_pump_toml_loads_without_warnings() -> None:
    cfg, ignored = load_pump(["--config", PUMP_TOML])
    assert ignored == []
    assert cfg.listen.addr == "127.0.0.1:8250" and cfg.listen.advertise_addr == ""
    assert (cfg.gc, cfg.heartbeat_interval, cfg.data_dir) == (7 * 86400.0, 2.0, "data.pump")
    assert cfg.pd_urls == ("http://127.0.0.1:2379",)


def test_stock_drainer_toml_loads_with_one_warning_per_ignored_key() -> None:
    cfg, ignored = load_drainer(["--config", DRAINER_TOML])
    assert [n.key for n in ignored] == [
        "syncer.sync-ddl",
        "syncer.loopback-control",
        "syncer.channel-id",
    ]
    assert all(n.origin == f"file {DRAINER_TOML}" and n.reason for n in ignored)
    assert "is ignored: DDL is always replicated" in str(ignored[0])
    syncer = cfg.syncer
    assert (cfg.listen.addr, cfg.detect_interval, cfg.compressor) == ("127.0.0.1:8249", 10.0, "")
    assert (syncer.txn_batch, syncer.worker_count, syncer.db_type) == (20, 16, "mysql")
    assert syncer.ignore_schemas == ("INFORMATION_SCHEMA", "PERFORMANCE_SCHEMA", "mysql")
    assert (syncer.to.host, syncer.to.port, syncer.to.user) == ("127.0.0.1", 3306, "root")
    assert syncer.sink_url(cfg.data_dir) == "mysql://root@127.0.0.1:3306/?consistent=true"


def test_without_a_list_the_loader_logs_each_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tributary.settings"):
        load(DrainerConfig, ["--config", DRAINER_TOML], {}, "DRAINER")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all(" is ignored: " in line for line in lines)


def test_unknown_keys_stay_errors_and_refused_values_are_errors(tmp_path: Path) -> None:
    text = (
        'bogus = 1\n[syncer]\nloopback-control = true\nsync-ddl = false\nsql-mode = ""\n'
        "[[syncer.table-migrate-rule]]\nsource = {schema = 'a'}\n"
        '[syncer.to.security]\nssl-ca = "ca.pem"\n[syncer.relay]\nlog-dir = "r"\n'
    )
    with pytest.raises(SettingsError) as e:
        load(DrainerConfig, ["--config", write(tmp_path, "d.toml", text)], {}, "DRAINER")
    problems = {p.key: p.message for p in e.value.problems}
    assert problems.keys() == {
        "bogus",
        "syncer.loopback-control",
        "syncer.sync-ddl",
        "syncer.table-migrate-rule",
        "syncer.to.security",
    }
    assert problems["bogus"].startswith("unknown key")
    assert problems["syncer.to.security"].startswith("not supported: TLS to the downstream")


def test_an_ignored_table_warns_once_naming_its_keys_and_an_empty_one_is_silent(
    tmp_path: Path,
) -> None:
    text = (
        '[syncer.relay]\nlog-dir = "/r"\nmax-file-size = 1\n'
        "[syncer.to.checkpoint]\n[syncer.to.security]\n"
    )
    path = write(tmp_path, "d.toml", text)
    _, ignored = load_drainer(["--config", path, "-relay-log-dir=/r2", "-loopback-control=false"])
    assert [(n.key, n.within) for n in ignored] == [
        ("syncer.relay", ("log-dir", "max-file-size")),
        ("syncer.loopback-control", ()),
        ("syncer.relay.log-dir", ()),  # the flag is an entry of its own
    ]
    text = "[storage.kv]\nblock-size = 4096\nwrite-buffer = 1\n"
    _, keys = load_pump(["--config", write(tmp_path, "p.toml", text), "-metrics-addr", "pg:9091"])
    assert keys == ["storage.kv", "metrics-addr"]


# -- Go-style flags -------------------------------------------------------------------------


def test_pump_takes_tidb_operators_command_line() -> None:
    argv = [
        "-L=debug",
        "-pd-urls=http://pd:2379",
        "-advertise-addr=pump-0.pump:8250",
        f"-config={PUMP_TOML}",
        "-data-dir=/var/lib/pump",
        "-log-file=",
    ]
    cfg, ignored = load_pump(argv)
    assert ignored == []
    assert (cfg.log.level, cfg.log.file, cfg.data_dir) == ("debug", "", "/var/lib/pump")
    assert cfg.pd_urls == ("http://pd:2379",)
    assert cfg.listen.advertise_addr == "pump-0.pump:8250"


@pytest.mark.parametrize(
    "argv",
    [
        ["-config", PUMP_TOML, "-node-id", "p1", "-gc", "3", "-L", "warn"],
        [f"-config={PUMP_TOML}", "-node-id=p1", "-gc=3", "-L=warn"],
        [f"--config={PUMP_TOML}", "--node-id", "p1", "--gc=3", "--log-level", "warn"],
    ],
)
def test_one_dash_or_two_with_or_without_equals(argv: list[str]) -> None:
    cfg, _ = load_pump(argv)
    assert (cfg.node_id, cfg.gc, cfg.log.level) == ("p1", 3 * 86400.0, "warn")
    assert cfg.listen.addr == "127.0.0.1:8250"  # from the file


def test_a_value_is_never_taken_for_a_flag() -> None:
    cfg, ignored = load_drainer(
        ["-initial-commit-ts", "-1", "-node-id", "-L", "-data-dir=-x", "-c", "4"]
    )
    assert (cfg.initial_commit_ts, cfg.node_id, cfg.data_dir) == (-1, "-L", "-x")
    assert cfg.syncer.worker_count == 4 and ignored == []


def test_drainer_takes_tidb_operators_command_line_and_go_flag_names() -> None:
    cfg, ignored = load_drainer(
        [
            "-L=info",
            "-pd-urls=http://pd:2379",
            "-addr=127.0.0.1:8249",
            f"-config={DRAINER_TOML}",
            "-disable-detect=false",
            "-initial-commit-ts=-1",
            "-data-dir=/data",
            "-log-file=",
            "-txn-batch=7",
            "-dest-db-type=file",
            "-safe-mode",
            "-ignore-schemas=a,b",
        ]
    )
    assert (cfg.initial_commit_ts, cfg.data_dir, cfg.log.file) == (-1, "/data", "")
    syncer = cfg.syncer
    assert (syncer.txn_batch, syncer.db_type, syncer.safe_mode) == (7, "file", True)
    assert syncer.ignore_schemas == ("a", "b")
    assert [n.key for n in ignored] == [
        "syncer.sync-ddl",
        "syncer.loopback-control",
        "syncer.channel-id",
        "syncer.disable-detect",
    ]


def test_unknown_single_dash_flags_are_still_errors() -> None:
    with pytest.raises(SettingsError, match="-no-such-flag"):
        load_pump(["-no-such-flag=1"])


def test_binlogctl_takes_tidb_binlogs_flags() -> None:
    cfg = parse_ctl(
        [
            "-cmd=update-pump",
            "-node-id",
            "p1",
            "-state=paused",
            "-pd-urls",
            "http://pd:2379",
            "-data-dir=/m",
            "-time-zone",
            "Asia/Shanghai",
            "-show-offline-nodes",
            "-timeout",
            "5",
        ]
    )
    assert cfg.command is Command.UPDATE_PUMP
    assert (cfg.node_id, cfg.state, cfg.data_dir, cfg.timeout) == ("p1", "paused", "/m", 5.0)
    assert cfg.pd_urls == ("http://pd:2379",) and cfg.show_offline_nodes
    assert str(cfg.zone()) == "Asia/Shanghai"
    cfg = parse_ctl(["-timeout", "5", "-cmd", "encrypt", "-text", "pw"])
    assert cfg.command is Command.ENCRYPT and cfg.text == "pw"
    cfg = parse_ctl(["-ssl-ca=", "-ssl-cert=", "-ssl-key=", "pumps"])
    assert cfg.command is Command.PUMPS


# -- the advertised address -----------------------------------------------------------------


def test_an_empty_advertise_addr_is_derived_as_go_does() -> None:
    assert advertise_for("127.0.0.1:8250", "", 8250) == "127.0.0.1:8250"
    assert advertise_for("127.0.0.1:0", "", 40123) == "127.0.0.1:40123"
    assert advertise_for("0.0.0.0:8250", "", 8250) == f"{default_ip()}:8250"
    assert advertise_for(":8250", "", 8250) == f"{default_ip()}:8250"
    assert advertise_for("0.0.0.0:8250", "pump-0.pump:8250", 8250) == "pump-0.pump:8250"
    ip = default_ip()
    assert ip.count(".") == 3 and not ip.startswith("0.")


def test_a_wildcard_addr_is_fine_but_a_wildcard_advertise_addr_is_not() -> None:
    cfg, _ = load_pump(["-addr=0.0.0.0:8250", "-advertise-addr="])
    assert cfg.listen.advertise_addr == ""
    with pytest.raises(SettingsError, match="advertise-addr"):
        load_pump(["-advertise-addr=0.0.0.0:8250"])
