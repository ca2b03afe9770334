"""Typed service settings: frozen dataclasses loaded from defaults, TOML, environment and flags.

Declare settings with ``setting()`` (leaf), ``group()`` (``[table]``) and ``tables()``
(``[[array]]``); load them with ``load(cls, argv, env, env_prefix)``; print the effective
configuration with ``dump(settings)``. A settings dataclass may define
``validate(self) -> Iterable[tuple[str, str]]`` yielding ``(toml_key, message)`` for cross-field
problems; they are reported together with parse problems in one ``SettingsError``.

The helpers only fill ``dataclasses.field`` metadata; the plain form works too:
``storage: StorageSettings = field(default_factory=StorageSettings, metadata={"help": "..."})``,
``gc: float = field(default=604800.0, metadata={"help": "...", "kind": DAYS_OR_DURATION})``
(metadata keys: help, toml, env, flag, kind, secret). Keys of another system the schema follows
(tidb-binlog) that it knows but does not implement go in a class attribute
``ignored_keys: ClassVar[tuple[Ignored, ...]]``: given, they are warnings, not errors. Flags
take Go's single dash too (``-data-dir=x``). Ruff's RUF009 does not know ``group()``;
list it in ``lint.flake8-bugbear.extend-immutable-calls`` or use the plain form.
"""

from tributary.settings.dump import dump
from tributary.settings.errors import Problem, SettingsError
from tributary.settings.flags import build_parser, go_style
from tributary.settings.ignored import Ignored, IgnoredSetting
from tributary.settings.kinds import (
    BOOL,
    BYTE_SIZE,
    DAYS_OR_DURATION,
    DURATION,
    FLOAT,
    HOST_PORT,
    INT,
    INT_LIST,
    OPTIONAL_HOST_PORT,
    STR,
    STR_LIST,
    URL_LIST,
    Kind,
    choice,
)
from tributary.settings.listen import ListenSettings
from tributary.settings.loader import from_toml, load
from tributary.settings.logs import LogSettings
from tributary.settings.model import group, setting, tables
from tributary.settings.progress import ProgressSettings
from tributary.settings.security import SecuritySettings

__all__ = [
    "BOOL",
    "BYTE_SIZE",
    "DAYS_OR_DURATION",
    "DURATION",
    "FLOAT",
    "HOST_PORT",
    "INT",
    "INT_LIST",
    "OPTIONAL_HOST_PORT",
    "STR",
    "STR_LIST",
    "URL_LIST",
    "Ignored",
    "IgnoredSetting",
    "Kind",
    "ListenSettings",
    "LogSettings",
    "Problem",
    "ProgressSettings",
    "SecuritySettings",
    "SettingsError",
    "build_parser",
    "choice",
    "dump",
    "from_toml",
    "go_style",
    "group",
    "load",
    "setting",
    "tables",
]
