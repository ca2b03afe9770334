"""``binlog-cdc`` without a subcommand: ``--help`` answers with the usage (exit 0), anything else
is bad usage (exit 2)."""

from __future__ import annotations

import pytest

from services.capture.cli import main


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_succeeds(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([flag]) == 0
    assert capsys.readouterr().out.startswith("usage: binlog-cdc server")


@pytest.mark.parametrize("argv", [[], ["serve"]])
def test_anything_else_is_bad_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("usage: binlog-cdc server")
