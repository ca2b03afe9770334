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


@pytest.mark.parametrize(
    ("argv", "server"),
    [
        (["changefeed", "list"], "127.0.0.1:8300"),
        (["--server", "a:1", "changefeed", "list"], "a:1"),
        (["changefeed", "list", "--server", "http://b:2"], "http://b:2"),
        (["--server", "a:1", "processor", "list", "--server", "b:2"], "b:2"),
        (["capture", "list", "--server", "c:3"], "c:3"),
        (["processor", "query", "-c", "cf", "-p", "c0", "--server", "d:4"], "d:4"),
    ],
)
def test_server_is_taken_before_or_after_the_command(argv: list[str], server: str) -> None:
    from services.capture.cli import _parser

    assert _parser().parse_args(argv).server == server


def test_commands_map_to_ticdc_routes() -> None:
    from services.capture.cli import _parser, _request

    def route(*argv: str) -> tuple[str, str]:
        method, path, _body, _query = _request(_parser().parse_args(argv))
        return method, path

    assert route("processor", "list") == ("GET", "/api/v2/processors")
    assert route("processor", "query", "-c", "cf", "-p", "c0") == (
        "GET",
        "/api/v2/processors/cf/c0",
    )
    assert route("changefeed", "statistics", "-c", "cf") == ("GET", "/api/v2/changefeeds/cf/status")


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0s"), (350, "350ms"), (1500, "1.5s"), (123250, "2m3.25s"), (3605000, "1h0m5s")],
)
def test_gaps_print_as_go_durations(ms: int, text: str) -> None:
    from services.capture.cli import go_duration

    assert go_duration(ms) == text
