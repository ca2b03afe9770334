"""binlogctl settings: flags (both ``--flag`` and tidb-binlog's ``-flag``), ``BINLOGCTL_*``
environment variables and an optional ``--config`` TOML file, through the shared loader.

The command is either the first positional word (``binlogctl pumps``) or ``-cmd``/``--cmd``
(``binlogctl -cmd pumps``, as tidb-binlog spells it); every flag takes Go's single dash
(``-timeout=5``), and tidb-binlog's ``-V``, ``-text`` and ``-time-zone`` are here too.
Invariant: ``split_command`` moves the positional word into ``--cmd=<word>`` without touching the
value of any flag, so the loader sees only flags, and giving the command both ways is a usage
error rather than a silent choice.
"""

from __future__ import annotations

import enum
import zoneinfo
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, tzinfo

from tributary.registry.status import NodeKind, NodeState
from tributary.settings import (
    DURATION,
    OPTIONAL_HOST_PORT,
    URL_LIST,
    Kind,
    LogSettings,
    Problem,
    SecuritySettings,
    SettingsError,
    choice,
    group,
    setting,
)
from tributary.settings.model import spec_tree


class Command(enum.StrEnum):
    PUMPS = "pumps"
    DRAINERS = "drainers"
    UPDATE_PUMP = "update-pump"
    UPDATE_DRAINER = "update-drainer"
    PAUSE_PUMP = "pause-pump"
    PAUSE_DRAINER = "pause-drainer"
    OFFLINE_PUMP = "offline-pump"
    OFFLINE_DRAINER = "offline-drainer"
    CATCHUP_DRAINER = "catchup-drainer"
    EXPORT_DRAINER_STATE = "export-drainer-state"
    GENERATE_META = "generate_meta"
    ENCRYPT = "encrypt"

    @property
    def kind(self) -> NodeKind | None:
        """The node kind the command works on (None for generate_meta and encrypt)."""
        if self in (Command.GENERATE_META, Command.ENCRYPT, Command.EXPORT_DRAINER_STATE):
            return None
        return NodeKind.DRAINER if self.value.endswith(("drainers", "drainer")) else NodeKind.PUMP

    @property
    def verb(self) -> str:
        """``list``, ``update``, ``pause``, ``offline``, ``catchup``, ``export``,
        ``generate_meta`` or ``encrypt``."""
        if self in (Command.PUMPS, Command.DRAINERS):
            return "list"
        return self.value.split("-")[0]

    @property
    def needs_node(self) -> bool:
        return self.verb in ("update", "pause", "offline", "catchup")


_STATES = tuple(s.value for s in NodeState)

_HELP = """\
Inspect and operate the pumps and drainers registered in etcd.

commands (positional, or -cmd NAME):
  pumps, drainers                 list node records (offline ones with --show-offline-nodes)
  update-pump, update-drainer     overwrite a record's state (--node-id, --state); only for
                                  repairing the record of a node whose process is dead
  pause-pump, pause-drainer       ask a running node to pause (--node-id)
  offline-pump, offline-drainer   ask a running node to go offline (--node-id); a pump first
                                  waits until every drainer consumed its binlogs
  catchup-drainer                 ask a running drainer to hand its backlog to a Spark catch-up
                                  job from its next binlog on (--node-id; [syncer.catchup])
  export-drainer-state            write a drainer's checkpoint and the DDL history up to it as
                                  one JSON file (--output, else stdout) that a new drainer
                                  starts from (its initial-state); the checkpoint is read from
                                  --sink-url (the downstream), else <--data-dir>/savepoint,
                                  else the record of a paused --node-id
  generate_meta                   write <data-dir>/savepoint with a fresh TSO commitTS
                                  (times shown in --time-zone)
  encrypt                         print --text encrypted as tidb-binlog does (AES-256,
                                  key $BINLOG_SECRET_KEY or the default): a drainer's
                                  [syncer.to] encrypted_password

The node's HTTP API is taken to be at its registered (gRPC) address, where pumps and drainers
serve it as tidb-binlog's do; pass --status-addr for another address."""


@dataclass(frozen=True)
class CtlConfig:
    __doc__ = _HELP

    cmd: str = setting(
        Command.PUMPS.value,
        "command to run (or give it as the first positional argument)",
        kind=Kind("COMMAND", choice(*(c.value for c in Command)).parse),
        flag=("--cmd", "-cmd"),
    )
    pd_urls: tuple[str, ...] = setting(
        ("http://127.0.0.1:2379",),
        "etcd endpoints, comma separated",
        kind=URL_LIST,
        flag=("--pd-urls", "-pd-urls"),
    )
    node_id: str = setting("", "node id to act on", flag=("--node-id", "-node-id"))
    state: str = setting(
        "", "state written by update-pump/update-drainer", kind=choice(*_STATES),
        flag=("--state", "-state"),
    )  # fmt: skip
    show_offline_nodes: bool = setting(
        False, "list offline nodes too", flag=("--show-offline-nodes", "-show-offline-nodes")
    )
    as_json: bool = setting(False, "print JSON instead of text", toml="json", flag="--json")
    status_addr: str = setting(
        "",
        "host:port of the node's HTTP API (default: the registered address)",
        kind=OPTIONAL_HOST_PORT,
        flag=("--status-addr", "-status-addr"),
    )
    wait: bool = setting(True, "after pause/offline, wait until etcd shows the node paused/offline")
    timeout: float = setting(
        600.0, "seconds to wait for a node to reach paused/offline", kind=DURATION
    )
    data_dir: str = setting(
        "binlog_position", "directory of the savepoint file", flag=("--data-dir", "-data-dir")
    )
    sink_url: str = setting(
        "",
        "export-drainer-state: the drainer's downstream (or a copy restored from its dump), "
        "whose checkpoint row is exported",
        flag=("--sink-url", "-sink-url"),
        secret=True,
    )
    output: str = setting(
        "", "export-drainer-state: the file to write ('' = stdout)", flag=("--output", "-output")
    )
    ddl_history: str = setting(
        "",
        "export-drainer-state: a TiDB status address (http://tidb:10080) whose DDL history to "
        "export; '' = the history in etcd",
        flag=("--ddl-history", "-ddl-history"),
    )
    ssl_ca: str = setting(
        "", "CA certificate (PEM) for TLS to the node's HTTP API", flag=("--ssl-ca", "-ssl-ca")
    )
    ssl_cert: str = setting(
        "", "client certificate (PEM) for TLS", flag=("--ssl-cert", "-ssl-cert")
    )
    ssl_key: str = setting("", "client private key (PEM) for TLS", flag=("--ssl-key", "-ssl-key"))
    text: str = setting(
        "", "plaintext for the encrypt command", flag=("--text", "-text"), secret=True
    )
    time_zone: str = setting(
        "",
        "zone of the times shown (savepoint, node lists): a name such as Asia/Shanghai, UTC, "
        "or Local; empty = this host's zone",
        flag=("--time-zone", "-time-zone"),
    )
    log: LogSettings = group(LogSettings, "logging", inline=True, default=LogSettings(level="warn"))

    @property
    def command(self) -> Command:
        return Command(self.cmd)

    def zone(self) -> tzinfo | None:
        """``time-zone`` as a tzinfo (None: this host's zone); ValueError for an unknown name."""
        name = self.time_zone.strip()
        if name in ("", "Local"):
            return None
        if name == "UTC":
            return UTC
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {name!r}") from None

    @property
    def security(self) -> SecuritySettings:
        return SecuritySettings(ssl_ca=self.ssl_ca, ssl_cert=self.ssl_cert, ssl_key=self.ssl_key)

    def validate(self) -> Iterator[tuple[str, str]]:
        command = self.command
        if command.needs_node and not self.node_id:
            yield "node-id", f"{command.value} needs --node-id"
        if command.verb == "update" and not self.state:
            yield "state", f"{command.value} needs --state ({', '.join(_STATES)})"
        if command is Command.ENCRYPT and not self.text:
            yield "text", "encrypt needs --text (the password to encrypt)"
        try:
            self.zone()
        except ValueError as e:
            yield "time-zone", str(e)
        if self.timeout <= 0:
            yield "timeout", "must be positive"
        yield from self.security.validate()


_BOOL_WORDS = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off"})
_CMD_FLAGS = ("--cmd", "-cmd")


def _flag_sets() -> tuple[frozenset[str], frozenset[str]]:
    """(flags taking a value, switch flags) of ``CtlConfig``, in both dash spellings."""
    values: set[str] = {"--config", "-config"}
    switches: set[str] = set()
    for leaf in spec_tree(CtlConfig).leaves():
        target = switches if leaf.kind is not None and leaf.kind.switch else values
        target.update(leaf.flags)
        target.update(f[1:] for f in leaf.flags if f.startswith("--"))
    return frozenset(values), frozenset(switches)


def split_command(argv: Sequence[str]) -> list[str]:
    """``argv`` with its first positional word turned into ``--cmd=<word>``.

    ``["--show-offline-nodes", "pumps", "-pd-urls", "http://e:2379"]`` ->
    ``["--show-offline-nodes", "-pd-urls", "http://e:2379", "--cmd=pumps"]``: a switch flag
    never takes the next word unless it is a boolean (``--wait false``); a value flag always
    does. Further positional words stay for the loader to report.
    """
    value_flags, switch_flags = _flag_sets()
    args = list(argv)
    out: list[str] = []
    command: str | None = None
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token.startswith("-") and len(token) > 1:
            out.append(token)
            if "=" in token or i >= len(args):
                continue
            follows = args[i]
            if token in value_flags or (
                token in switch_flags and follows.strip().lower() in _BOOL_WORDS
            ):
                out.append(follows)
                i += 1
            continue
        if command is None:
            command = token
        else:
            out.append(token)
    if command is None:
        return out
    if any(a.split("=", 1)[0] in _CMD_FLAGS for a in out):
        raise SettingsError(
            [Problem("cmd", "command line", f"command given twice ({command!r} and -cmd)")]
        )
    return [*out, f"--cmd={command}"]
