"""Inline settings groups: shared concerns whose keys live in the enclosing table."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tributary.settings import (
    ListenSettings,
    LogSettings,
    SettingsError,
    build_parser,
    dump,
    group,
    load,
    setting,
)


@dataclass(frozen=True)
class Inner:
    depth: int = setting(1, "how deep")


@dataclass(frozen=True)
class Server:
    listen: ListenSettings = group(
        ListenSettings, "where it listens", inline=True, default=ListenSettings("127.0.0.1:8250")
    )
    status_addr: str = setting("", "HTTP address")
    log: LogSettings = group(LogSettings, "logging", inline=True)
    inner: Inner = group(Inner, "a table", default=Inner(depth=3))

    def validate(self) -> Iterator[tuple[str, str]]:
        if self.listen.advertise.startswith("0.0.0.0"):
            yield "advertise-addr", "must be reachable"


def test_inline_keys_are_top_level_with_per_use_defaults(tmp_path: Path) -> None:
    s = load(Server, [], {}, "SRV")
    assert s.listen == ListenSettings("127.0.0.1:8250")
    assert s.log == LogSettings() and s.inner == Inner(depth=3)
    path = tmp_path / "s.toml"
    path.write_text('addr = "10.0.0.1:1"\nlog-format = "json"\n')
    env = {"SRV_LOG_LEVEL": "debug", "SRV_ADVERTISE_ADDR": "h:2"}
    s = load(Server, ["--config", str(path), "-L", "error", "--log-file", "f.log"], env, "SRV")
    assert s.listen == ListenSettings("10.0.0.1:1", "h:2") and s.listen.advertise == "h:2"
    assert s.log == LogSettings("error", "json", "f.log")
    assert s.inner == Inner(depth=3)


def test_inline_keys_keep_their_place_in_dump_and_help() -> None:
    text = dump(Server())
    keys = [line.split(" = ")[0] for line in text.splitlines() if " = " in line]
    assert keys[:6] == [
        "addr",
        "advertise-addr",
        "status-addr",
        "log-level",
        "log-format",
        "log-file",
    ]
    assert text.index("log-file") < text.index("[inner]")
    assert "depth = 3" in text
    usage = " ".join(build_parser(Server, env_prefix="SRV").format_help().split())
    assert "toml: log-level; env: SRV_LOG_LEVEL" in usage
    assert "toml: advertise-addr; env: SRV_ADVERTISE_ADDR" in usage
    assert "default: 3; toml: inner.depth" in usage


def test_a_validate_hook_names_the_inline_key_with_its_origin() -> None:
    with pytest.raises(SettingsError) as e:
        load(Server, ["--advertise-addr", "0.0.0.0:1"], {}, "SRV")
    (problem,) = e.value.problems
    assert (problem.key, problem.origin) == ("advertise-addr", "flag --advertise-addr")


def test_inline_names_are_checked_for_clashes() -> None:
    @dataclass(frozen=True)
    class Clash:
        log_level: str = setting("info", "a second log-level")
        log: LogSettings = group(LogSettings, "logging", inline=True)

    with pytest.raises(TypeError, match="log-level"):
        load(Clash, [], {}, "X")
