"""Loading a settings dataclass from its defaults, a TOML file, the environment and flags.

Precedence, lowest first: field defaults < TOML file (``--config FILE`` or ``<PREFIX>_CONFIG``)
< environment (``<PREFIX>_<TOML PATH>``) < command-line flags. Invariant: every source is parsed
in full even after a problem, and ``load`` either returns settings in which every value parsed
and every ``validate()`` hook passed, or raises one ``SettingsError`` listing every problem.
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Mapping, Sequence
from typing import TypeVar

from tributary.settings.errors import Problem, SettingsError
from tributary.settings.flags import parse_flags
from tributary.settings.ignored import IgnoredSetting, ignored_keys
from tributary.settings.model import GroupSpec, spec_tree
from tributary.settings.values import Collected, apply_table, apply_value, build, check

T = TypeVar("T")

log = logging.getLogger(__name__)


def load(
    cls: type[T],
    argv: Sequence[str],
    env: Mapping[str, str],
    env_prefix: str,
    *,
    prog: str | None = None,
    version: str | None = None,
    ignored: list[IgnoredSetting] | None = None,
) -> T:
    """Effective settings of type ``cls``.

    ``argv`` excludes the program name (``sys.argv[1:]``); ``env`` is usually ``os.environ``;
    ``env_prefix`` such as ``"PUMP"`` gives ``PUMP_DATA_DIR``. ``--help`` (and ``-V`` /
    ``--version``, printing ``version``, when given) prints and exits. Environment variables
    with the prefix that match no setting are ignored (Kubernetes adds ``<SERVICE>_PORT``-style
    variables of its own). Keys and flags of the class's ``ignored_keys`` that were given are
    appended to ``ignored`` (one per entry), or logged as warnings when it is None: a CLI
    passes a list and logs it once logging is configured.
    """
    root = spec_tree(cls)
    out = Collected(known=ignored_keys(cls))
    flags = parse_flags(cls, argv, prog=prog, env_prefix=env_prefix, version=version)
    config, flag_values = flags.config, flags.values
    out.problems += flags.problems
    config_var = _env_name(env_prefix, "CONFIG")
    if config is None and env.get(config_var):
        config = env[config_var]
    if config is not None:
        _apply_file(root, config, out)
    for leaf in root.leaves():
        name = _env_name(env_prefix, leaf.env)
        if name in env:
            apply_value(leaf, env[name], f"env {name}", out)
    for leaf, raw in flag_values:
        apply_value(leaf, raw, f"flag {leaf.flags[0]}", out)
    settings: T = build(root, out.values)
    out.problems += check(root, settings, out.origins)
    if out.problems:
        raise SettingsError(out.problems)
    seen = {n.key for n in out.ignored}
    found = out.ignored + [n for n in flags.ignored if n.key not in seen]
    if ignored is not None:
        ignored += found
    for notice in found if ignored is None else ():
        log.warning("%s", notice)
    return settings


def from_toml(cls: type[T], data: bytes, origin: str = "config") -> T:
    """Settings of type ``cls`` from the TOML document ``data`` alone (defaults beneath it; no
    environment, no flags): what ``load`` makes of a config file, or one ``SettingsError``."""
    root = spec_tree(cls)
    out = Collected(known=ignored_keys(cls))
    _apply_toml(root, data, origin, out)
    settings: T = build(root, out.values)
    out.problems += check(root, settings, out.origins)
    if out.problems:
        raise SettingsError(out.problems)
    return settings


def _apply_file(root: GroupSpec, path: str, out: Collected) -> None:
    origin = f"file {path}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        out.problems.append(Problem("config", origin, f"cannot read: {e.strerror or e}"))
        return
    _apply_toml(root, data, origin, out)


def _apply_toml(root: GroupSpec, data: bytes, origin: str, out: Collected) -> None:
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:  # tomllib.load raises this one as it is, not as TOML's
        out.problems.append(Problem("config", origin, f"not valid TOML: not UTF-8 ({e})"))
        return
    except tomllib.TOMLDecodeError as e:
        out.problems.append(Problem("config", origin, f"not valid TOML: {e}"))
        return
    apply_table(root, table, origin, out)


def _env_name(prefix: str, suffix: str) -> str:
    return f"{prefix}_{suffix}" if prefix else suffix
