"""Declaring settings, and the spec tree the loader, the flag parser and ``dump`` work from.

A service declares its settings as frozen dataclasses. Every field carries a default and help
text (the meaning and unit); ``setting()`` attaches them, plus optional overrides of the TOML key,
environment variable, flags and value kind. A field whose type is a dataclass is a TOML table
(``[storage]``); ``tuple[SomeDataclass, ...]`` is an array of tables (``[[syncer.ignore-table]]``).

Names derive from the attribute path unless overridden: attribute ``sync_log`` in group
``storage`` is TOML key ``storage.sync-log``, environment ``<PREFIX>_STORAGE_SYNC_LOG`` and flag
``--storage-sync-log``. An inline group (``group(..., inline=True)``) is a dataclass whose
settings are keys of the enclosing table, in its place among the others: a concern several
services share (``LogSettings``: ``log-level``, ``log-format``, ``log-file``) without a table of
its own; ``group(..., default=instance)`` gives one use of a group its own defaults.

Invariant: within one settings class TOML keys, environment names and flags are unique, every
field has help text and a default, and every field has a kind; a violation is a programming
error raised as ``TypeError`` when the spec is first built.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from tributary.settings.kinds import Kind, infer_kind

T = TypeVar("T")


def setting(
    default: T,
    help: str,
    *,
    toml: str | None = None,
    env: str | None = None,
    flag: str | Sequence[str] | None = None,
    kind: Kind | None = None,
    secret: bool = False,
) -> T:
    """Declare one setting field.

    ``toml``: key within its table (default: attribute name with dashes). ``env``: variable
    name after ``<PREFIX>_`` (default: TOML path upper-cased, dashes and dots as underscores).
    ``flag``: full flag spelling(s) such as ``"--gc"`` or ``("-L", "--log-level")`` (default:
    ``--`` + TOML path joined with dashes). ``secret``: masked by ``dump``.
    """
    flags = (flag,) if isinstance(flag, str) else tuple(flag) if flag is not None else None
    meta = {"help": help, "toml": toml, "env": env, "flag": flags, "kind": kind, "secret": secret}
    return dataclasses.field(default=default, metadata=meta)


def group(
    cls: type[T],
    help: str,
    *,
    toml: str | None = None,
    inline: bool = False,
    default: T | None = None,
) -> T:
    """Declare a nested settings table (a TOML ``[table]``) with default values.

    ``inline``: no table of its own; the group's settings are keys of the enclosing table (their
    names derive as if they were declared there). ``default``: an instance whose values are this
    use's defaults (default: the class's own).
    """
    factory: Callable[[], T] = cls if default is None else lambda: default
    meta = {"help": help, "toml": toml, "inline": inline, "default": default}
    return dataclasses.field(default_factory=factory, metadata=meta)


def tables(
    cls: type[T], help: str, *, default: tuple[T, ...] = (), toml: str | None = None
) -> tuple[T, ...]:
    """Declare an array of tables (``[[x]]``); each item is a ``cls`` dataclass."""
    del cls  # the item type is read from the annotation; the argument documents it
    return dataclasses.field(default=default, metadata={"help": help, "toml": toml})


@dataclass(frozen=True)
class FieldSpec:
    """One leaf setting: where it lives in the dataclass, in TOML, in the environment and flags."""

    attrs: tuple[str, ...]
    toml: tuple[str, ...]
    env: str
    flags: tuple[str, ...]
    help: str
    default: object
    kind: Kind | None
    items: GroupSpec | None
    secret: bool

    @property
    def key(self) -> str:
        return ".".join(self.toml)


@dataclass(frozen=True)
class GroupSpec:
    """A settings dataclass (the root or a nested TOML table) and its members."""

    cls: type[Any]
    attrs: tuple[str, ...]
    toml: tuple[str, ...]
    help: str
    fields: tuple[FieldSpec, ...]  # this table's leaves, inline groups' ones in their place
    groups: tuple[GroupSpec, ...]  # nested tables
    inlines: tuple[GroupSpec, ...] = ()  # inline groups (their leaves are in ``fields``)

    @property
    def key(self) -> str:
        return ".".join(self.toml)

    def own(self, leaf: FieldSpec) -> bool:
        """Whether ``leaf`` is an attribute of ``cls`` itself (not of an inline group)."""
        return len(leaf.attrs) == len(self.attrs) + 1

    def leaves(self) -> Iterator[FieldSpec]:
        """Every leaf field of this group and its subgroups, depth first."""
        yield from self.fields
        for sub in self.groups:
            yield from sub.leaves()


_TREES: dict[type[Any], GroupSpec] = {}


def spec_tree(cls: type[Any]) -> GroupSpec:
    """The spec tree of a settings dataclass (cached; raises TypeError on a bad declaration)."""
    root = _TREES.get(cls)
    if root is None:
        root = _group(cls, (), (), cls.__doc__ or "")
        _check_unique(root)
        _TREES[cls] = root
    return root


def value_at(instance: object, group: GroupSpec, leaf: FieldSpec) -> object:
    """The value of ``leaf`` in ``instance`` of ``group.cls`` (through inline groups)."""
    for attr in leaf.attrs[len(group.attrs) :]:
        instance = getattr(instance, attr)
    return instance


def _group(
    cls: type[Any],
    attrs: tuple[str, ...],
    toml: tuple[str, ...],
    help: str,
    defaults: object = None,
) -> GroupSpec:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"settings type {cls!r} is not a dataclass")
    try:
        hints = typing.get_type_hints(cls)
    except NameError as e:
        raise TypeError(f"cannot resolve annotations of {cls.__qualname__}: {e}") from e
    leaves: list[FieldSpec] = []
    subgroups: list[GroupSpec] = []
    inlines: list[GroupSpec] = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        where = f"{cls.__name__}.{f.name}"
        if not meta.get("help"):
            raise TypeError(f"settings field {where} has no help text")
        key = meta.get("toml") or f.name.replace("_", "-")
        annotation = hints[f.name]
        if dataclasses.is_dataclass(annotation):
            sub_cls = cast(type, annotation)
            sub_defaults = _group_defaults(f, sub_cls, where, defaults)
            inline = bool(meta.get("inline"))
            sub_toml = toml if inline else (*toml, key)
            sub = _group(sub_cls, (*attrs, f.name), sub_toml, meta["help"], sub_defaults)
            if not inline:
                subgroups.append(sub)
                continue
            if sub.groups:
                raise TypeError(f"inline settings group {where} cannot hold tables")
            leaves.extend(sub.fields)
            inlines.append(sub)
            continue
        if f.default is dataclasses.MISSING:
            raise TypeError(f"settings field {where} has no default")
        default = f.default if defaults is None else getattr(defaults, f.name)
        leaves.append(_leaf(f, annotation, (*attrs, f.name), (*toml, key), where, default))
    return GroupSpec(cls, attrs, toml, help, tuple(leaves), tuple(subgroups), tuple(inlines))


def _group_defaults(
    f: dataclasses.Field[Any], annotation: type, where: str, defaults: object
) -> object:
    """The instance holding the defaults of group field ``f`` (None: the class's own)."""
    if defaults is not None:
        return getattr(defaults, f.name)
    given = f.metadata.get("default")
    if given is not None:
        if not isinstance(given, annotation):
            raise TypeError(f"settings table {where}: default is not a {annotation.__name__}")
        return given
    if f.default_factory is not cast(object, annotation):
        raise TypeError(f"settings table {where} needs default_factory={annotation!r}")
    return None


def _leaf(
    f: dataclasses.Field[Any],
    annotation: object,
    attrs: tuple[str, ...],
    toml: tuple[str, ...],
    where: str,
    default: object,
) -> FieldSpec:
    meta = f.metadata
    items: GroupSpec | None = None
    kind: Kind | None = meta.get("kind") or infer_kind(annotation)
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple and len(args) == 2 and args[1] is Ellipsis:
        if dataclasses.is_dataclass(args[0]):
            items = _group(cast(type, args[0]), (), (), meta["help"])
            kind = None
    if kind is None and items is None:
        raise TypeError(f"settings field {where}: give kind= for annotation {annotation!r}")
    env = meta.get("env") or "_".join(toml).upper().replace("-", "_")
    flag = meta.get("flag") or ("--" + "-".join(toml).replace("_", "-"),)
    flags = (flag,) if isinstance(flag, str) else tuple(flag)
    return FieldSpec(
        attrs, toml, env, flags, meta["help"], default, kind, items, bool(meta.get("secret"))
    )


def _check_unique(root: GroupSpec) -> None:
    seen: dict[str, str] = {}
    for leaf in root.leaves():
        for name in (f"toml {leaf.key}", f"env {leaf.env}", *(f"flag {f}" for f in leaf.flags)):
            if name in seen:
                raise TypeError(f"settings {name} is used by both {seen[name]} and {leaf.key}")
            seen[name] = leaf.key
    for reserved in ("flag --config", "env CONFIG", "flag -h", "flag --help"):
        if reserved in seen:
            raise TypeError(f"settings {reserved} is reserved (used by {seen[reserved]})")
