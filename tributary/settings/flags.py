"""The command-line parser derived from a settings dataclass.

Every leaf setting gets a flag named like its TOML path (``--data-dir``, ``--storage-sync-log``)
whose help shows the meaning, default, TOML key and environment variable; ``--config FILE``
names the TOML file. Flags are parsed as raw strings (values are parsed by the setting's kind,
like environment values). Invariant: a flag that was not given leaves no trace in the result, so
it never overrides the file or the environment with a default.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from tributary.settings.dump import MASK, toml_literal
from tributary.settings.errors import Problem, SettingsError
from tributary.settings.model import FieldSpec, GroupSpec, spec_tree
from tributary.settings.values import render_value

CONFIG_DEST = "config"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise SettingsError([Problem("arguments", "command line", message)])


def build_parser(
    cls: type[Any],
    *,
    prog: str | None = None,
    env_prefix: str | None = None,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` for the settings class ``cls``.

    Syntax errors raise ``SettingsError`` instead of exiting; ``--help`` prints and exits as
    usual. Parsed values are strings in ``vars(namespace)[".".join(field.attrs)]``.
    """
    root = spec_tree(cls)
    parser = _Parser(
        prog=prog,
        description=description or root.help,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--config",
        dest=CONFIG_DEST,
        metavar="FILE",
        help="TOML configuration file"
        + (f" [env: {_env(env_prefix, 'CONFIG')}]" if env_prefix is not None else ""),
    )
    _add_group(parser, root, env_prefix)
    return parser


def _add_group(parser: argparse.ArgumentParser, group: GroupSpec, env_prefix: str | None) -> None:
    target: Any = parser
    if group.toml:
        target = parser.add_argument_group(f"[{group.key}]", group.help)
    for leaf in group.fields:
        extra: dict[str, Any] = {"nargs": "?", "const": "true"} if _is_switch(leaf) else {}
        target.add_argument(
            *leaf.flags,
            dest=".".join(leaf.attrs),
            metavar=leaf.kind.metavar if leaf.kind else "TOML-ARRAY",
            help=_help(leaf, env_prefix).replace("%", "%%"),
            **extra,
        )
    for sub in group.groups:
        _add_group(parser, sub, env_prefix)


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


def parse_flags(
    cls: type[Any], argv: Sequence[str], *, prog: str | None, env_prefix: str
) -> tuple[str | None, list[tuple[FieldSpec, str]], list[Problem]]:
    """``(config file, [(field, raw value)], problems)`` from the command line."""
    parser = build_parser(cls, prog=prog, env_prefix=env_prefix)
    try:
        namespace, rest = parser.parse_known_args(list(argv))
    except SettingsError as e:
        return None, [], list(e.problems)
    given = vars(namespace)
    problems = [
        Problem(arg, "command line", "unknown flag" if arg.startswith("-") else "unexpected")
        for arg in rest
    ]
    raw = [
        (leaf, given[".".join(leaf.attrs)])
        for leaf in spec_tree(cls).leaves()
        if ".".join(leaf.attrs) in given
    ]
    return given.get(CONFIG_DEST), raw, problems
