"""``-V``/``--version`` on every console script: tidb-binlog's layout, the package's version."""

from __future__ import annotations

import platform
from importlib import metadata

import pytest

from tributary.version import version_text

SCRIPTS = {
    ep.name: ep
    for ep in metadata.entry_points(group="console_scripts")
    if ep.dist is not None and ep.dist.name == "tributary"
}


def test_every_declared_script_is_covered() -> None:
    assert set(SCRIPTS) == {
        "binlog-pump",
        "binlog-drainer",
        "binlog-tso",
        "binlogctl",
        "reparo",
        "tributary-check",
        "binlog-workload",
        "binlog-cdc",
        "binlog-arbiter",
        "binlog-status",
    }


def test_version_text_has_tidb_binlogs_lines() -> None:
    lines = version_text().splitlines()
    assert lines[0] == f"Release Version: {metadata.version('tributary')}"
    keys = [line.split(":", 1)[0] for line in lines]
    assert [k for k in keys if k != "Git Commit Hash"] == [
        "Release Version",
        "Build TS",
        "Python Version",
        "Python OS/Arch",
    ]
    assert f"Python Version: {platform.python_version()}" in lines


@pytest.mark.parametrize("flag", ["-V", "--version"])
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_prints_the_version_and_exits_0(
    script: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main = SCRIPTS[script].load()
    try:
        code = main([flag])
    except SystemExit as e:
        code = e.code
    assert code in (0, None)
    assert capsys.readouterr().out.strip() == version_text()
