"""Collecting parsed values onto a spec tree, building the dataclasses, running their checks.

Values from each source are parsed as they are applied; a bad value becomes a ``Problem`` and
leaves the previous value (or the default) in place, so one load reports every problem.
Invariant: ``Collected.values`` only ever holds values that parsed, keyed by attribute path, with
``origins`` saying which source set each one last.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tributary.settings.errors import Problem
from tributary.settings.ignored import Ignored, IgnoredSetting, given_keys, match
from tributary.settings.model import FieldSpec, GroupSpec, value_at

Path = tuple[str, ...]


@dataclass
class Collected:
    values: dict[Path, object] = field(default_factory=dict)
    origins: dict[Path, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    known: tuple[Ignored, ...] = ()  # the schema's ignored keys
    ignored: list[IgnoredSetting] = field(default_factory=list)  # one per entry given

    def ignore(self, entry: Ignored, key: str, raw: object, origin: str) -> None:
        """Record ``key`` (a key or table of ``entry``) given as ``raw`` by ``origin``."""
        inner = given_keys(raw) if isinstance(raw, Mapping) else []
        if isinstance(raw, Mapping) and not inner:
            return  # an empty table sets nothing
        if entry.refuses(raw):
            self.problems.append(Problem(key, origin, f"not supported: {entry.reason}"))
        elif all(n.key != entry.key for n in self.ignored):
            self.ignored.append(IgnoredSetting(entry.key, origin, entry.reason, tuple(inner)))


def apply_table(group: GroupSpec, table: Mapping[str, object], origin: str, out: Collected) -> None:
    """Apply one TOML table; unknown keys are problems (strict, like tidb-binlog), keys the
    schema lists as ignored are recorded in ``out.ignored``."""
    leaves = {leaf.toml[-1]: leaf for leaf in group.fields}
    subs = {sub.toml[-1]: sub for sub in group.groups}
    for key, raw in table.items():
        full = ".".join((*group.toml, key))
        if key in subs:
            if isinstance(raw, dict):
                apply_table(subs[key], raw, origin, out)
            else:
                out.problems.append(Problem(full, origin, f"expected a table [{full}]"))
        elif key in leaves:
            apply_value(leaves[key], raw, origin, out)
        elif (entry := match(out.known, full)) is not None:
            out.ignore(entry, full, raw, origin)
        else:
            hint = difflib.get_close_matches(key, [*leaves, *subs], n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            out.problems.append(Problem(full, origin, f"unknown key{extra}"))


def apply_value(leaf: FieldSpec, raw: object, origin: str, out: Collected) -> None:
    try:
        value = parse_value(leaf, raw)
    except ValueError as e:
        out.problems.append(Problem(leaf.key, origin, str(e)))
        return
    out.values[leaf.attrs] = value
    out.origins[leaf.attrs] = origin


def parse_value(leaf: FieldSpec, raw: object) -> object:
    if leaf.items is not None:
        return _parse_items(leaf.items, raw)
    assert leaf.kind is not None
    return leaf.kind.parse(raw)


def render_value(leaf: FieldSpec, value: object) -> object:
    """The TOML value for a setting value (the inverse of ``parse_value``)."""
    if leaf.items is not None:
        assert isinstance(value, tuple)
        return [as_table(leaf.items, item) for item in value]
    assert leaf.kind is not None
    return leaf.kind.render(value)


def as_table(group: GroupSpec, instance: object) -> dict[str, object]:
    """A dataclass instance as a TOML table (nested dict) keyed by TOML names."""
    table: dict[str, object] = {
        leaf.toml[-1]: render_value(leaf, value_at(instance, group, leaf)) for leaf in group.fields
    }
    for sub in group.groups:
        table[sub.toml[-1]] = as_table(sub, getattr(instance, sub.attrs[-1]))
    return table


def _parse_items(group: GroupSpec, raw: object) -> tuple[object, ...]:
    if isinstance(raw, str):  # from env or a flag: a TOML inline array of tables
        try:
            raw = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            raise ValueError("expected a TOML array of inline tables like [{a = 1}]") from None
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise ValueError("expected an array of tables")
    items: list[object] = []
    messages: list[str] = []
    for n, table in enumerate(raw, start=1):
        sub = Collected()
        apply_table(group, table, "", sub)
        instance = build(group, sub.values)
        sub.problems += check(group, instance, sub.origins)
        messages += [f"item {n}: {p.key}: {p.message}" for p in sub.problems]
        items.append(instance)
    if messages:
        raise ValueError("; ".join(messages))
    return tuple(items)


def build(group: GroupSpec, values: Mapping[Path, object]) -> Any:
    """Instantiate ``group.cls`` from collected values; missing ones keep their defaults."""
    kwargs: dict[str, object] = {
        leaf.attrs[-1]: values.get(leaf.attrs, leaf.default)
        for leaf in group.fields
        if group.own(leaf)
    }
    for sub in (*group.inlines, *group.groups):
        kwargs[sub.attrs[-1]] = build(sub, values)
    return group.cls(**kwargs)


def check(group: GroupSpec, instance: object, origins: Mapping[Path, str]) -> list[Problem]:
    """Run each dataclass's optional ``validate()`` hook over the built settings.

    The hook yields ``(toml_key, message)`` pairs, the key relative to its own table.
    """
    problems: list[Problem] = []
    hook = getattr(instance, "validate", None)
    if callable(hook):
        leaves = {leaf.toml[-1]: leaf for leaf in group.fields}
        found: Iterable[tuple[str, str]] = hook()
        for key, message in found:
            leaf = leaves.get(key)
            origin = origins.get(leaf.attrs, "default") if leaf else "settings"
            problems.append(Problem(".".join((*group.toml, key)), origin, message))
    for sub in (*group.inlines, *group.groups):
        problems += check(sub, getattr(instance, sub.attrs[-1]), origins)
    return problems
