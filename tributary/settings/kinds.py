"""Value kinds: how one setting is parsed from TOML, environment and flags, and rendered back.

A field's kind comes from its ``kind=`` metadata or is inferred from its annotation (``str``,
``int``, ``float``, ``bool``, ``tuple[str, ...]``, ``Literal["a", "b"]``). Invariant: a kind's
``render`` returns a TOML-representable value that its ``parse`` accepts and maps back to the same
setting value.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tributary.settings import parsers


def _identity(value: Any) -> object:
    return value


@dataclass(frozen=True)
class Kind:
    """Parse/render pair for one kind of setting value.

    ``parse`` receives a TOML value or a string and raises ``ValueError`` on bad input;
    ``render`` turns a setting value into a TOML value; ``metavar`` names the kind in ``--help``;
    a ``switch`` kind (bool) may be given as a bare flag meaning true.
    """

    metavar: str
    parse: Callable[[object], Any]
    render: Callable[[Any], object] = _identity
    switch: bool = False


STR = Kind("STR", parsers.parse_str)
INT = Kind("INT", parsers.parse_int)
FLOAT = Kind("FLOAT", parsers.parse_float)
BOOL = Kind("BOOL", parsers.parse_bool, switch=True)
DURATION = Kind("DURATION", parsers.parse_duration, parsers.render_duration)
"""Seconds (float): ``3``, ``1.5``, ``"250ms"``, ``"1h30m"``."""
BYTE_SIZE = Kind("SIZE", parsers.parse_byte_size, parsers.render_byte_size)
"""Bytes (int): ``1048576``, ``"10 gib"``, ``"500MB"``."""
DAYS_OR_DURATION = Kind(
    "DAYS|DURATION", parsers.parse_days_or_duration, parsers.render_days_or_duration
)
"""Seconds (float) from a number of days (``7``) or a duration (``"8h"``)."""
STR_LIST = Kind("LIST", parsers.parse_str_list, list)
"""``tuple[str, ...]`` from a TOML array or ``"a,b,c"``."""
INT_LIST = Kind("INTS", parsers.parse_int_list, list)
"""``tuple[int, ...]`` from a TOML array or ``"1,2,3"``."""
URL_LIST = Kind("URLS", parsers.parse_url_list, list)
"""``tuple[str, ...]`` of http(s) URLs from a TOML array or ``"http://a:2379,http://b:2379"``."""
HOST_PORT = Kind("HOST:PORT", parsers.parse_host_port)
"""A ``host:port`` string, validated (see ``tributary.net.split_host_port``)."""
OPTIONAL_HOST_PORT = Kind("[HOST:PORT]", parsers.parse_optional_host_port)
"""``""`` (unset, as tidb-binlog's empty ``advertise-addr = ""``) or a ``host:port`` string."""


def choice(*values: str) -> Kind:
    """One of ``values``, matched case-insensitively and returned as spelled in ``values``."""
    by_lower = {v.lower(): v for v in values}

    def parse(value: object) -> str:
        text = parsers.parse_str(value)
        try:
            return by_lower[text.strip().lower()]
        except KeyError:
            raise ValueError(f"expected one of {', '.join(values)}; got {text!r}") from None

    return Kind("|".join(values), parse)


_BY_TYPE: dict[object, Kind] = {str: STR, int: INT, float: FLOAT, bool: BOOL}


def infer_kind(annotation: object) -> Kind | None:
    """The kind for a plain annotation, or None when it needs an explicit ``kind=``."""
    if annotation in _BY_TYPE:
        return _BY_TYPE[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal and all(isinstance(a, str) for a in args):
        return choice(*args)
    if origin is tuple and args == (str, Ellipsis):
        return STR_LIST
    return None
