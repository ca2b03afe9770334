"""The command-line parser derived from a settings dataclass.

Every leaf setting gets a flag named like its TOML path (``--data-dir``, ``--storage-sync-log``)
whose help shows the meaning, default, TOML key and environment variable; ``--config FILE``
names the TOML file; ``-V``/``--version`` prints the version when the caller gives one. Flags
are parsed as raw strings (values are parsed by the setting's kind, like environment values).

Go's flag package spells every flag with one dash or two (``-config=x``, ``-config x``,
``--pd-urls=...``), and tidb-operator's start scripts use the single dash: ``go_style`` rewrites
``-name`` to ``--name`` when ``--name`` is a flag, and joins a value flag with its value
(``--data-dir=/x``), before argparse sees the line. Invariant: a flag that was not given leaves no
trace in the result, so it never overrides the file or the environment with a default; a value is
never taken for a flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tributary.settings.dump import MASK, toml_literal
from tributary.settings.errors import Problem, SettingsError
from tributary.settings.ignored import IgnoredSetting, ignored_keys
from tributary.settings.model import FieldSpec, GroupSpec, spec_tree
from tributary.settings.values import render_value

CONFIG_DEST = "config"
IGNORED_DEST = "ignored:"  # + the ignored entry's key
VERSION_FLAGS = ("-V", "--version")


class FlagParser(argparse.ArgumentParser):
    """Raises ``SettingsError``; knows its flags and which of them take a value."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.known_flags: set[str] = {"-h", "--help"}
        self.value_flags: set[str] = set()

    def error(self, message: str) -> NoReturn:
        raise SettingsError([Problem("arguments", "command line", message)])

    def flag(self, target: Any, *names: str, switch: bool, **kwargs: Any) -> None:
        """Add a flag to ``target`` (this parser or one of its groups)."""
        extra: dict[str, Any] = {"nargs": "?", "const": "true"} if switch else {}
        target.add_argument(*names, **extra, **kwargs)
        self.known_flags.update(names)
        if not switch:
            self.value_flags.update(names)


def build_parser(
    cls: type[Any],
    *,
    prog: str | None = None,
    env_prefix: str | None = None,
    description: str | None = None,
    version: str | None = None,
) -> FlagParser:
    """An ``ArgumentParser`` for the settings class ``cls``.

    Syntax errors raise ``SettingsError`` instead of exiting; ``--help`` (and ``-V``/``--version``
    when ``version`` is given) prints and exits as usual. Parsed values are strings in
    ``vars(namespace)[".".join(field.attrs)]``; a flag of an ignored entry (``ignored_keys``)
    lands in ``IGNORED_DEST + entry.key``.
    """
    root = spec_tree(cls)
    parser = FlagParser(
        prog=prog,
        description=description or root.help,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    config_help = "TOML configuration file"
    if env_prefix is not None:
        config_help += f" [env: {_env(env_prefix, 'CONFIG')}]"
    parser.flag(
        parser, "--config", switch=False, dest=CONFIG_DEST, metavar="FILE", help=config_help
    )
    if version is not None:
        parser.add_argument(
            *VERSION_FLAGS, action="version", version=version, help="print the version and exit"
        )
        parser.known_flags.update(VERSION_FLAGS)
    _add_group(parser, parser, root, env_prefix)
    _add_ignored(parser, cls)
    return parser


def _add_group(parser: FlagParser, target: Any, group: GroupSpec, env_prefix: str | None) -> None:
    if group.toml:
        target = parser.add_argument_group(f"[{group.key}]", group.help)
    for leaf in group.fields:
        parser.flag(
            target,
            *leaf.flags,
            switch=_is_switch(leaf),
            dest=".".join(leaf.attrs),
            metavar=leaf.kind.metavar if leaf.kind else "TOML-ARRAY",
            help=_help(leaf, env_prefix).replace("%", "%%"),
        )
    for sub in group.groups:
        _add_group(parser, parser, sub, env_prefix)


def _add_ignored(parser: FlagParser, cls: type[Any]) -> None:
    entries = [e for e in ignored_keys(cls) if e.flags]
    if not entries:
        return
    target = parser.add_argument_group(
        "accepted and ignored", "flags of tidb-binlog that have no effect here (a warning says so)"
    )
    for entry in entries:
        parser.flag(
            target,
            *entry.flags,
            switch=entry.switch,
            dest=IGNORED_DEST + entry.key,
            metavar="BOOL" if entry.switch else "VALUE",
            help=f"ignored: {entry.reason}".replace("%", "%%"),
        )


def go_style(parser: FlagParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with Go's spellings made argparse's (see the module docstring).

    ``["-config", "p.toml", "-L=info", "-log-file=", "-V"]`` ->
    ``["--config=p.toml", "-L=info", "--log-file=", "-V"]``. Everything after ``--`` is kept.
    """
    known, values = parser.known_flags, parser.value_flags
    out: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            out += args[i - 1 :]
            break
        name, eq, _ = token.partition("=")
        if name.startswith("-") and not name.startswith("--") and name not in known:
            if "-" + name in known:
                token, name = "-" + token, "-" + name
        if name in values and not eq and i < len(args):
            token = f"{token}={args[i]}"
            i += 1
        out.append(token)
    return out


def _is_switch(leaf: FieldSpec) -> bool:
    return leaf.kind is not None and leaf.kind.switch


def _help(leaf: FieldSpec, env_prefix: str | None) -> str:
    default = (
        MASK if leaf.secret and leaf.default else toml_literal(render_value(leaf, leaf.default))
    )
    text = f"{leaf.help} [default: {default}; toml: {leaf.key}"
    if env_prefix is not None:
        text += f"; env: {_env(env_prefix, leaf.env)}"
    return text + "]"


def _env(prefix: str | None, suffix: str) -> str:
    return f"{prefix}_{suffix}" if prefix else suffix


@dataclass
class ParsedFlags:
    """What the command line said: the config file, settings' raw values, ignored flags."""

    config: str | None = None
    values: list[tuple[FieldSpec, str]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    ignored: list[IgnoredSetting] = field(default_factory=list)


def parse_flags(
    cls: type[Any],
    argv: Sequence[str],
    *,
    prog: str | None,
    env_prefix: str,
    version: str | None = None,
) -> ParsedFlags:
    """The command line's config file, raw setting values, problems and ignored flags."""
    parser = build_parser(cls, prog=prog, env_prefix=env_prefix, version=version)
    try:
        namespace, rest = parser.parse_known_args(go_style(parser, argv))
    except SettingsError as e:
        return ParsedFlags(problems=list(e.problems))
    given = vars(namespace)
    out = ParsedFlags(config=given.get(CONFIG_DEST))
    out.problems = [
        Problem(arg, "command line", "unknown flag" if arg.startswith("-") else "unexpected")
        for arg in rest
    ]
    out.values = [
        (leaf, given[".".join(leaf.attrs)])
        for leaf in spec_tree(cls).leaves()
        if ".".join(leaf.attrs) in given
    ]
    for entry in ignored_keys(cls):
        raw = given.get(IGNORED_DEST + entry.key)
        if raw is None:
            continue
        origin = f"flag {entry.flags[0]}"
        if entry.refuses(raw):
            out.problems.append(Problem(entry.key, origin, f"not supported: {entry.reason}"))
        else:
            out.ignored.append(IgnoredSetting(entry.key, origin, entry.reason))
    return out
