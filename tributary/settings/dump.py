"""Rendering effective settings as TOML, for logging the configuration a service runs with.

Invariant: without secrets, ``dump`` output is valid TOML that ``load`` reads back to equal
settings (each value is rendered by its kind, e.g. ``gc = 7``, ``"10 GiB"``, ``"1h30m"``);
secret settings are masked as ``"******"``, except a URL's: only its password is masked
(``mysql://u:******@h:3306/``), so the log still says where the service connects.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import urlsplit

from tributary.settings.model import GroupSpec, spec_tree, value_at
from tributary.settings.values import render_value

MASK = "******"


def dump(settings: Any) -> str:
    """The settings dataclass instance as TOML text: top-level keys, then ``[tables]``."""
    lines: list[str] = []
    _dump_group(spec_tree(type(settings)), settings, lines)
    return "\n".join(lines).strip() + "\n"


def _dump_group(group: GroupSpec, instance: object, lines: list[str]) -> None:
    if group.toml:
        lines += ["", f"[{group.key}]"]
    for leaf in group.fields:
        value = value_at(instance, group, leaf)
        rendered = masked(value) if leaf.secret and value else render_value(leaf, value)
        lines.append(f"{leaf.toml[-1]} = {toml_literal(rendered)}")
    for sub in group.groups:
        _dump_group(sub, getattr(instance, sub.attrs[-1]), lines)


def masked(value: object) -> object:
    """A secret setting's value as shown: a URL with its password masked, anything else MASK."""
    if not isinstance(value, str) or "://" not in value:
        return MASK
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return MASK
    if password is None:
        return value
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}").geturl()


def toml_literal(value: object) -> str:
    """A TOML literal for str, int, float, bool, lists and tables (inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {value!r} as TOML")
