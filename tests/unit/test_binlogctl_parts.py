"""binlogctl's pure parts: command-line parsing, the status address, rendering,
the savepoint file, and the wait on the registry (over MemoryKv)."""

from __future__ import annotations

import asyncio
import json
import tomllib
from datetime import UTC, timedelta, timezone
from pathlib import Path

import pytest

from services.binlogctl import actions, render
from services.binlogctl.cli import main, parse
from services.binlogctl.config import Command, split_command
from services.binlogctl.errors import CtlError, NodeNotFound, WaitTimedOut
from services.binlogctl.meta import savepoint_text, write_savepoint
from services.binlogctl.results import ActionApplied, MetaWritten, NodeList, StateUpdated
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.settings import SettingsError
from tributary.wire import ts as tso

PUMP = NodeKind.PUMP
TS = tso.compose(1_700_000_000_123, 7)  # 2023-11-14 22:13:20.123 UTC
CST = timezone(timedelta(hours=8))


def node(
    node_id: str, state: NodeState = NodeState.ONLINE, addr: str = "10.0.0.5:8250"
) -> NodeStatus:
    return NodeStatus(node_id, addr, state, max_commit_ts=TS, update_ts=TS + 5)


# -- command line ----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["pumps"], ["--cmd=pumps"]),
        (
            ["--show-offline-nodes", "pumps", "-pd-urls", "http://e:2379"],
            ["--show-offline-nodes", "-pd-urls", "http://e:2379", "--cmd=pumps"],
        ),
        (["--json", "true", "drainers"], ["--json", "true", "--cmd=drainers"]),
        (["--node-id", "pumps", "pause-pump"], ["--node-id", "pumps", "--cmd=pause-pump"]),
        (["-cmd", "pumps", "--wait=false"], ["-cmd", "pumps", "--wait=false"]),
        (["pumps", "extra"], ["extra", "--cmd=pumps"]),
        ([], []),
    ],
)
def test_split_command_moves_only_the_positional_word(argv: list[str], expected: list[str]) -> None:
    assert split_command(argv) == expected


def test_command_given_twice_is_a_usage_error() -> None:
    with pytest.raises(SettingsError, match="command given twice"):
        split_command(["pumps", "-cmd", "drainers"])


def test_parse_accepts_both_flag_spellings_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BINLOGCTL_PD_URLS", "http://a:2379,http://b:2379")
    monkeypatch.setenv("BINLOGCTL_TIMEOUT", "2m")
    cfg = parse(["-cmd", "update-pump", "-node-id=p1", "-state", "paused", "--json"])
    assert cfg.command is Command.UPDATE_PUMP
    assert (cfg.node_id, cfg.state, cfg.as_json) == ("p1", "paused", True)
    assert cfg.pd_urls == ("http://a:2379", "http://b:2379")
    assert cfg.timeout == 120.0
    cfg = parse(["offline-drainer", "--node-id", "d1", "--pd-urls", "http://c:2379"])
    assert cfg.command.kind is NodeKind.DRAINER and cfg.command.verb == "offline"
    assert cfg.pd_urls == ("http://c:2379",)  # a flag beats the environment
    assert cfg.wait and cfg.data_dir == "binlog_position"


def test_parse_reports_every_problem_at_once() -> None:
    with pytest.raises(SettingsError) as e:
        parse(["update-drainer", "--state", "gone", "--timeout", "0", "--ssl-cert", "c.pem"])
    keys = sorted(p.key for p in e.value.problems)
    assert keys == ["node-id", "ssl-cert", "ssl-key", "state", "state", "timeout"]
    with pytest.raises(SettingsError, match="expected one of pumps, drainers"):
        parse(["list-pumps"])


def test_main_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pause-pump"]) == 2
    err = capsys.readouterr().err
    assert "pause-pump needs --node-id" in err and "Traceback" not in err
    assert main(["--help"]) == 0
    assert "generate_meta" in capsys.readouterr().out


# -- where the node's HTTP API is ------------------------------------------


def test_status_address_defaults_to_the_registered_address() -> None:
    assert actions.status_address(node("p", addr="10.0.0.5:8250")) == "10.0.0.5:8250"
    assert actions.status_address(node("p", addr="[fd00::5]:8250")) == "[fd00::5]:8250"
    assert actions.status_address(node("p", addr="pump-0.pump:8250")) == "pump-0.pump:8250"
    assert actions.status_address(node("p"), "10.0.0.5:9000") == "10.0.0.5:9000"
    with pytest.raises(CtlError, match="pass --status-addr"):
        actions.status_address(node("p", addr="nowhere"))
    with pytest.raises(CtlError, match="pass --status-addr"):
        actions.status_address(node("p", addr="h:0"))


def test_state_url() -> None:
    assert actions.state_url("h:8251", "host:8250", "offline", tls=False) == (
        "http://h:8251/state/host:8250/close"
    )
    assert actions.state_url("h:8251", "a/b", "pause", tls=True) == (
        "https://h:8251/state/a%2Fb/pause"
    )


# -- rendering ---------------------------------------------------------------


def test_format_ts_decodes_the_physical_part() -> None:
    assert render.format_ts(TS, UTC) == "2023-11-14 22:13:20.123 +00:00"
    assert render.format_ts(TS, CST) == "2023-11-15 06:13:20.123 +08:00"
    assert render.format_ts(0, UTC) == "-"


def test_node_table_is_aligned() -> None:
    text = render.render(NodeList(PUMP, (node("p1"), node("pump-22", NodeState.PAUSED))), tz=UTC)
    assert text.splitlines() == [
        "NODE ID  ADDRESS        STATE   MAX COMMIT TS       COMMIT TIME"
        "                     UPDATE TIME",
        f"p1       10.0.0.5:8250  online  {TS}  2023-11-14 22:13:20.123 +00:00"
        "  2023-11-14 22:13:20.123 +00:00",
        f"pump-22  10.0.0.5:8250  paused  {TS}  2023-11-14 22:13:20.123 +00:00"
        "  2023-11-14 22:13:20.123 +00:00",
    ]


def test_empty_lists_say_so() -> None:
    assert render.render(NodeList(PUMP, ())) == "no pumps registered"
    assert render.render(NodeList(NodeKind.DRAINER, (), 2)) == (
        "no online drainers registered (2 offline hidden; add --show-offline-nodes)"
    )


def test_json_output_is_the_stored_records() -> None:
    result = NodeList(PUMP, (node("p1"),))
    assert json.loads(render.render(result, as_json=True)) == [json.loads(node("p1").to_json())]
    updated = StateUpdated(PUMP, node("p1"), node("p1", NodeState.OFFLINE))
    assert render.render(updated) == "pump p1: state online -> offline (written to etcd)"
    assert json.loads(render.render(updated, as_json=True))["state"] == "offline"
    waited = ActionApplied(PUMP, "p1", "pause", "http://x/state/p1/pause", "pausing", None)
    assert render.render(waited) == "pump p1 accepted pause: now pausing"
    assert json.loads(render.render(waited, as_json=True))["record"] is None
    meta = MetaWritten(Path("d/savepoint"), TS, "commitTS = 1\n")
    assert json.loads(render.render(meta, as_json=True)) == {"commitTS": TS, "path": "d/savepoint"}


def test_not_found_names_the_known_nodes() -> None:
    assert str(NodeNotFound(PUMP, "x", ["a", "b"])) == (
        "no pump with node id 'x' in etcd; registered pumps: a, b"
    )
    assert "no drainers are registered" in str(NodeNotFound(NodeKind.DRAINER, "x", []))


# -- savepoint -------------------------------------------------------------


def test_savepoint_is_toml_with_readable_times(tmp_path: Path) -> None:
    text = savepoint_text(TS, CST)
    assert text == (
        f"commitTS = {TS}\n"
        "# UTC:   2023-11-14 22:13:20.123 +00:00\n"
        "# local: 2023-11-15 06:13:20.123 +08:00\n"
    )
    path = write_savepoint(tmp_path / "binlog_position", text)
    assert path == tmp_path / "binlog_position" / "savepoint"
    assert tomllib.loads(path.read_text()) == {"commitTS": TS}
    write_savepoint(tmp_path / "binlog_position", savepoint_text(TS + 1))  # replaces it
    assert tomllib.loads(path.read_text()) == {"commitTS": TS + 1}
    assert [p.name for p in path.parent.iterdir()] == ["savepoint"]  # no temporary left


# -- waiting on the registry -------------------------------------------------


async def test_wait_follows_the_record_to_the_target() -> None:
    reg = NodeRegistry(MemoryKv())
    await reg.update(PUMP, node("p1"))
    seen: list[str] = []

    async def pump_goes_offline() -> None:
        for state in (NodeState.CLOSING, NodeState.OFFLINE):
            await asyncio.sleep(0.05)
            await reg.update(PUMP, node("p1", state))

    async with asyncio.TaskGroup() as tg:
        tg.create_task(pump_goes_offline(), name="fake-pump")
        final = await actions.wait_for_state(
            reg, PUMP, "p1", NodeState.OFFLINE, 30, seen.append, poll=0.01
        )
    assert final.state is NodeState.OFFLINE
    assert seen == ["pump p1: closing"]


async def test_wait_fails_on_the_other_settled_state_and_on_timeout() -> None:
    reg = NodeRegistry(MemoryKv())
    await reg.update(PUMP, node("p1", NodeState.PAUSED))
    with pytest.raises(CtlError, match="pump p1 became paused instead of offline"):
        await actions.wait_for_state(
            reg, PUMP, "p1", NodeState.OFFLINE, 30, lambda _: None, poll=0.01
        )
    await reg.update(PUMP, node("p1", NodeState.CLOSING))
    with pytest.raises(WaitTimedOut, match="still closing after 0 s") as e:
        await actions.wait_for_state(
            reg, PUMP, "p1", NodeState.OFFLINE, 0.1, lambda _: None, poll=0.01
        )
    assert "binlogctl drainers" in str(e.value) and e.value.retriable
