"""Loading settings: precedence, strict TOML, one error listing every problem, flags, dump."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from tributary.config.drainer import DrainerConfig, SyncerConfig
from tributary.settings import (
    BYTE_SIZE,
    DAYS_OR_DURATION,
    DURATION,
    HOST_PORT,
    URL_LIST,
    Problem,
    SecuritySettings,
    SettingsError,
    build_parser,
    dump,
    from_toml,
    group,
    load,
    setting,
    tables,
)
from tributary.settings.dump import masked


@dataclass(frozen=True)
class StorageSettings:
    sync_log: bool = setting(True, "fsync the value log after each write")
    kv_chan_cap: int = setting(1048576, "capacity of the index channel", toml="kv_chan_cap")
    slow_write_threshold: float = setting(
        1.0,
        "seconds after which a write is logged as slow",
        toml="slow_write_threshold",
        kind=DURATION,
    )
    stop_write_at_available_space: int = setting(
        10 * 2**30, "refuse writes below this many free bytes", kind=BYTE_SIZE
    )


@dataclass(frozen=True)
class TableRule:
    db_name: str = setting("", "schema name")
    tbl_name: str = setting("", "table name")

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.db_name:
            yield "db-name", "required"


@dataclass(frozen=True)
class PumpSettings:
    """Pump test settings."""

    addr: str = setting("127.0.0.1:8250", "gRPC listen address", kind=HOST_PORT)
    data_dir: str = setting("data.pump", "directory of the value log and index")
    pd_urls: tuple[str, ...] = setting(("http://127.0.0.1:2379",), "etcd endpoints", kind=URL_LIST)
    gc: float = setting(7 * 86400.0, "binlog retention", kind=DAYS_OR_DURATION)
    gen_binlog_interval: float = setting(
        3.0,
        "fake binlog interval",
        kind=DURATION,
        flag=("--gen-binlog-interval", "--fake-binlog-interval"),
    )
    log_level: Literal["debug", "info", "warn", "error"] = setting(
        "info", "log level", flag=("-L", "--log-level")
    )
    password: str = setting("", "downstream password", secret=True)
    ignore_table: tuple[TableRule, ...] = tables(TableRule, "tables to skip")
    storage: StorageSettings = group(StorageSettings, "the binlog store")
    security: SecuritySettings = group(SecuritySettings, "TLS")


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_defaults_without_any_source() -> None:
    assert load(PumpSettings, [], {}, "PUMP") == PumpSettings()


def test_toml_with_tidb_binlog_key_names(tmp_path: Path) -> None:
    config = write(
        tmp_path / "pump.toml",
        """
addr = "0.0.0.0:8250"
data-dir = "/var/pump"
pd-urls = ["http://pd1:2379", "http://pd2:2379"]
gc = 3
gen-binlog-interval = 5

[storage]
sync-log = false
kv_chan_cap = 2048
slow_write_threshold = 0.5
stop-write-at-available-space = "1 gib"

[security]
cert-allowed-cn = ["drainer"]
""",
    )
    with pytest.raises(SettingsError) as err:  # cert-allowed-cn without ssl-ca
        load(PumpSettings, ["--config", config], {}, "PUMP")
    assert [p.key for p in err.value.problems] == ["security.cert-allowed-cn"]
    assert err.value.problems[0].origin == f"file {config}"

    s = load(PumpSettings, ["--config", config, "--security-cert-allowed-cn="], {}, "PUMP")
    assert s.addr == "0.0.0.0:8250"
    assert s.data_dir == "/var/pump"
    assert s.pd_urls == ("http://pd1:2379", "http://pd2:2379")
    assert s.gc == 3 * 86400
    assert s.gen_binlog_interval == 5.0
    assert s.storage == StorageSettings(False, 2048, 0.5, 2**30)
    assert s.security.cert_allowed_cn == ()


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    config = write(
        tmp_path / "p.toml", 'gc = "8h"\ndata-dir = "from-file"\n[storage]\nsync-log = false\n'
    )
    env = {"PUMP_GC": "30m", "PUMP_STORAGE_SYNC_LOG": "true", "PUMP_CONFIG": config}
    s = load(PumpSettings, ["--gc", "90s"], env, "PUMP")
    assert s.gc == 90.0  # flag beats env beats file
    assert s.storage.sync_log is True  # env beats file
    assert s.data_dir == "from-file"  # file beats default
    assert s.addr == "127.0.0.1:8250"  # default
    s = load(PumpSettings, [], env, "PUMP")
    assert s.gc == 1800.0  # an absent flag does not override with its default


def test_flag_config_wins_over_env_config(tmp_path: Path) -> None:
    a = write(tmp_path / "a.toml", 'data-dir = "a"\n')
    b = write(tmp_path / "b.toml", 'data-dir = "b"\n')
    assert load(PumpSettings, ["--config", b], {"PUMP_CONFIG": a}, "PUMP").data_dir == "b"


def test_flags_bool_switches_aliases_and_choices() -> None:
    s = load(PumpSettings, ["--storage-sync-log=false", "-L", "DEBUG"], {}, "PUMP")
    assert s.storage.sync_log is False
    assert s.log_level == "debug"
    s = load(PumpSettings, ["--storage-sync-log", "--fake-binlog-interval", "250ms"], {}, "PUMP")
    assert s.storage.sync_log is True
    assert s.gen_binlog_interval == 0.25
    s = load(PumpSettings, ["--storage-sync-log", "no"], {}, "PUMP")
    assert s.storage.sync_log is False


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    config = write(
        tmp_path / "bad.toml",
        """
data-dri = "typo"
gc = "soon"
addr = 8250
[storage]
sync-log = "perhaps"
unknown_thing = 1
[security]
ssl-cert = "/nonexistent/cert.pem"
""",
    )
    env = {"PUMP_STORAGE_KV_CHAN_CAP": "lots", "PUMP_PD_URLS": "pd:2379"}
    argv = ["--config", config, "--gen-binlog-interval", "-3", "-L", "loud", "--bogus"]
    with pytest.raises(SettingsError) as err:
        load(PumpSettings, argv, env, "PUMP")
    got = {(p.key, p.origin) for p in err.value.problems}
    file = f"file {config}"
    assert got == {
        ("--bogus", "command line"),
        ("data-dri", file),
        ("gc", file),
        ("addr", file),
        ("storage.sync-log", file),
        ("storage.unknown_thing", file),
        ("storage.kv_chan_cap", "env PUMP_STORAGE_KV_CHAN_CAP"),
        ("pd-urls", "env PUMP_PD_URLS"),
        ("gen-binlog-interval", "flag --gen-binlog-interval"),
        ("log-level", "flag -L"),
        ("security.ssl-key", "default"),  # cert without key
        ("security.ssl-cert", file),  # no such file
    }
    text = str(err.value)
    assert text.startswith("12 problems in settings:")
    assert "data-dri (file " in text and "did you mean 'data-dir'?" in text
    assert "expected one of debug, info, warn, error" in text
    assert err.value.retriable is False


def test_config_file_problems(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as err:
        load(PumpSettings, ["--config", str(tmp_path / "missing.toml")], {}, "PUMP")
    assert err.value.problems[0].key == "config"
    assert "cannot read" in err.value.problems[0].message
    broken = write(tmp_path / "broken.toml", "gc = = 3\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load(PumpSettings, [], {"PUMP_CONFIG": broken}, "PUMP")


def test_a_config_file_that_is_not_utf8_is_a_settings_error(tmp_path: Path) -> None:
    """Seen writing the fuzz targets (toml_*): ``tomllib.load`` let UnicodeDecodeError out."""
    latin1 = tmp_path / "pump.toml"
    latin1.write_bytes(b'data-dir = "/var/d\xe9p\xf4t"\n')
    with pytest.raises(SettingsError, match="not UTF-8") as err:
        load(PumpSettings, ["--config", str(latin1)], {}, "PUMP")
    assert err.value.problems[0].key == "config"
    with pytest.raises(SettingsError, match="not UTF-8"):
        from_toml(PumpSettings, b"gc = 3\n# \xff\n")
    assert from_toml(PumpSettings, b"gc = 3\n").gc == 3 * 86400


def test_table_shape_mismatches(tmp_path: Path) -> None:
    config = write(tmp_path / "p.toml", 'storage = "fast"\n[data-dir]\nx = 1\n')
    with pytest.raises(SettingsError) as err:
        load(PumpSettings, ["--config", config], {}, "PUMP")
    messages = {p.key: p.message for p in err.value.problems}
    assert messages["storage"] == "expected a table [storage]"
    assert "expected a string" in messages["data-dir"]


def test_arrays_of_tables_from_toml_and_env(tmp_path: Path) -> None:
    config = write(
        tmp_path / "p.toml",
        '[[ignore-table]]\ndb-name = "a"\ntbl-name = "t1"\n[[ignore-table]]\ndb-name = "b"\n',
    )
    s = load(PumpSettings, ["--config", config], {}, "PUMP")
    assert s.ignore_table == (TableRule("a", "t1"), TableRule("b", ""))
    env = {"PUMP_IGNORE_TABLE": '[{db-name = "c", tbl-name = "x"}]'}
    assert load(PumpSettings, [], env, "PUMP").ignore_table == (TableRule("c", "x"),)
    env = {"PUMP_IGNORE_TABLE": '[{tbl-name = "x", colour = 1}]'}
    with pytest.raises(SettingsError) as err:
        load(PumpSettings, [], env, "PUMP")
    (problem,) = err.value.problems
    assert problem == Problem(
        "ignore-table",
        "env PUMP_IGNORE_TABLE",
        "item 1: colour: unknown key; item 1: db-name: required",
    )


def test_unrelated_prefixed_environment_is_ignored() -> None:
    # Kubernetes service links inject variables like these for a Service named "pump".
    env = {"PUMP_PORT": "tcp://10.0.0.1:8250", "PUMP_SERVICE_HOST": "10.0.0.1", "OTHER_GC": "x"}
    assert load(PumpSettings, [], env, "PUMP") == PumpSettings()


def test_parser_help_documents_every_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no line wrapping
    text = build_parser(PumpSettings, prog="pump", env_prefix="PUMP").format_help()
    for expected in (
        "--config FILE",
        "--data-dir",
        "directory of the value log and index",
        '[default: "data.pump"; toml: data-dir; env: PUMP_DATA_DIR]',
        "--storage-stop-write-at-available-space SIZE",
        '"10 GiB"',
        "PUMP_STORAGE_KV_CHAN_CAP",
        "[storage]",
        "the binlog store",
        "-L debug|info|warn|error, --log-level",
        "--fake-binlog-interval",
    ):
        assert expected in text
    with pytest.raises(SystemExit) as exit_:
        load(PumpSettings, ["--help"], {}, "PUMP", prog="pump")
    assert exit_.value.code == 0
    assert "--storage-sync-log" in capsys.readouterr().out


def test_dump_reloads_to_equal_settings(tmp_path: Path) -> None:
    ca = write(tmp_path / "ca.pem", "x")
    env = {
        "PUMP_GC": "8h",
        "PUMP_STORAGE_STOP_WRITE_AT_AVAILABLE_SPACE": "1.5 GiB",
        "PUMP_STORAGE_SLOW_WRITE_THRESHOLD": "250ms",
        "PUMP_IGNORE_TABLE": '[{db-name = "a\\"b", tbl-name = "t"}]',
        "PUMP_SECURITY_SSL_CA": ca,
        "PUMP_SECURITY_CERT_ALLOWED_CN": "drainer,binlogctl",
        "PUMP_DATA_DIR": "dir with spaces/ünïcode",
    }
    original = load(PumpSettings, ["--storage-sync-log=false"], env, "PUMP")
    text = dump(original)
    assert "[storage]\nsync-log = false\n" in text
    assert 'stop-write-at-available-space = "1536 MiB"' in text
    assert 'gc = "8h"' in text
    config = write(tmp_path / "dumped.toml", text)
    assert load(PumpSettings, ["--config", config], {}, "PUMP") == original


def test_dump_masks_secrets() -> None:
    s = load(PumpSettings, ["--password", "hunter2"], {}, "PUMP")
    text = dump(s)
    assert "hunter2" not in text
    assert 'password = "******"' in text
    assert 'password = ""' in dump(PumpSettings())


def test_dump_masks_only_the_password_of_a_secret_url() -> None:
    url = "mysql://rep:s3cret@db:3306/?safe-mode=true"
    cfg = dataclasses.replace(DrainerConfig(), syncer=SyncerConfig(sink_uri=url))
    text = dump(cfg)
    assert "s3cret" not in text
    assert 'sink-uri = "mysql://rep:******@db:3306/?safe-mode=true"' in text
    assert masked("sqlite:///a/b.db") == "sqlite:///a/b.db"
    assert masked("not a url") == "******"
    assert masked("mysql://u:p@[::1:3306/") == "******"  # unparsable: masked whole


def test_security_cross_checks(tmp_path: Path) -> None:
    key = write(tmp_path / "k.pem", "x")
    with pytest.raises(SettingsError) as err:
        load(
            PumpSettings, ["--security-ssl-key", key, "--security-cert-allowed-cn", "a"], {}, "PUMP"
        )
    assert {(p.key, p.origin) for p in err.value.problems} == {
        ("security.ssl-cert", "default"),
        ("security.cert-allowed-cn", "flag --security-cert-allowed-cn"),
    }


def test_bad_declarations_fail_early() -> None:
    @dataclass(frozen=True)
    class NoHelp:
        x: int = 1

    @dataclass(frozen=True)
    class Unsupported:
        x: frozenset[str] = setting(frozenset(), "a set")

    @dataclass(frozen=True)
    class Clash:
        a: int = setting(1, "a", flag="--x")
        b: int = setting(2, "b", flag="--x")

    @dataclass(frozen=True)
    class Reserved:
        config: str = setting("", "would shadow --config")

    @dataclass(frozen=True)
    class CustomNested:
        storage: StorageSettings = dataclasses.field(
            default_factory=lambda: StorageSettings(sync_log=False), metadata={"help": "x"}
        )

    for cls, message in (
        (CustomNested, "needs default_factory="),
        (NoHelp, "no help text"),
        (Unsupported, "give kind="),
        (Clash, "flag --x is used by both"),
        (Reserved, "reserved"),
    ):
        with pytest.raises(TypeError, match=message):
            load(cls, [], {}, "X")


@dataclass(frozen=True)
class PlainInner:
    level: int = dataclasses.field(default=1, metadata={"help": "a level", "flag": "--lvl"})


@dataclass(frozen=True)
class PlainOuter:
    retention: float = dataclasses.field(
        default=86400.0, metadata={"help": "kept for", "kind": DAYS_OR_DURATION, "env": "KEEP"}
    )
    inner: PlainInner = dataclasses.field(default_factory=PlainInner, metadata={"help": "nested"})


def test_plain_dataclass_field_metadata_works() -> None:
    s = load(PlainOuter, ["--lvl", "3"], {"X_KEEP": "2"}, "X")
    assert s == PlainOuter(2 * 86400.0, PlainInner(3))
    assert "[inner]\nlevel = 3\n" in dump(s)
