"""Parsers and renderers for human-written setting values.

Each ``parse_*`` accepts what a TOML file can hold (int, float, bool, str, array) and the plain
strings that environment variables and flags carry, and raises ``ValueError`` with a message that
says what was expected. Invariant: for every ``render_*``, ``parse_x(render_x(v)) == v``, so the
effective configuration printed by ``settings.dump`` can be loaded back unchanged.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from urllib.parse import urlsplit

from tributary.net import split_host_port

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"expected a boolean (true/false), got {value!r}")


def parse_int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip().replace("_", ""), 10)
        except ValueError:
            pass
    raise ValueError(f"expected an integer, got {value!r}")


def parse_float(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {value!r}")


def parse_str(value: object) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, got {value!r}")


# Go-style durations: "1h30m", "250ms", "1.5s"; "d" is accepted as 24h for convenience.
_DURATION_UNITS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
    "d": Fraction(86400),
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d)")


def parse_duration(value: object) -> float:
    """Seconds from an int/float number of seconds or a duration such as ``"1h30m"``."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        seconds = float(value)
    elif isinstance(value, str) and _is_number(value):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        seconds = float(_parse_duration_text(value.strip()))
    else:
        raise ValueError(f"expected seconds or a duration like '1h30m', got {value!r}")
    if seconds < 0:
        raise ValueError(f"a duration must not be negative, got {value!r}")
    return seconds


def _parse_duration_text(text: str) -> Fraction:
    total = Fraction(0)
    pos = 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += Fraction(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"expected a duration like '90s', '30m' or '1h30m', got {text!r}")
    return total


def render_duration(seconds: float) -> str:
    """``5400.0 -> "1h30m"``, ``0.25 -> "250ms"``, ``1.5 -> "1.5s"``, ``0 -> "0s"``."""
    if float(seconds).is_integer():
        whole = int(seconds)
        hours, rest = divmod(whole, 3600)
        minutes, secs = divmod(rest, 60)
        parts = [f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
        return "".join(parts) or "0s"
    millis = seconds * 1000
    if seconds < 1 and millis.is_integer() and int(millis) / 1000 == seconds:
        return f"{int(millis)}ms"
    return f"{seconds!r}s"


# go-humanize ParseBytes semantics: "k"/"kb" are powers of 1000, "ki"/"kib" powers of 1024.
_SIZE_PREFIXES = "kmgtpe"
_SIZE_UNITS: dict[str, int] = {"": 1, "b": 1}
for _i, _p in enumerate(_SIZE_PREFIXES, start=1):
    _SIZE_UNITS |= {_p: 1000**_i, _p + "b": 1000**_i, _p + "i": 1024**_i, _p + "ib": 1024**_i}
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)")


def parse_byte_size(value: object) -> int:
    """Bytes from an int or a humanized size: ``"10 gib"``, ``"500MiB"``, ``"1.5GB"``."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"a size must not be negative, got {value!r}")
        return value
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip().lower())
        if match and match.group(2) in _SIZE_UNITS:
            return int(Fraction(match.group(1)) * _SIZE_UNITS[match.group(2)])
    raise ValueError(f"expected a byte count or a size like '10 GiB' or '500MB', got {value!r}")


def render_byte_size(size: int) -> int | str:
    """The largest binary unit that divides ``size`` exactly: ``10 * 2**30 -> "10 GiB"``."""
    for i in range(len(_SIZE_PREFIXES), 0, -1):
        unit = 1024**i
        if size and size % unit == 0:
            return f"{size // unit} {_SIZE_PREFIXES[i - 1].upper()}iB"
    return size


def parse_days_or_duration(value: object) -> float:
    """Seconds from a number of days (tidb-binlog's ``gc = 7``) or a duration (``"8h"``)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        days = float(value)
    elif isinstance(value, str) and _is_number(value):
        days = float(value)
    else:
        try:
            return parse_duration(value)
        except ValueError:
            raise ValueError(
                f"expected a number of days or a duration like '8h', got {value!r}"
            ) from None
    if days < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return days * 86400


def render_days_or_duration(seconds: float) -> int | str:
    days = seconds / 86400
    if days.is_integer() and days * 86400 == seconds:
        return int(days)
    return render_duration(seconds)


def parse_str_list(value: object) -> tuple[str, ...]:
    """A TOML array of strings or a comma-separated string (blank items dropped)."""
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ValueError(f"expected a list of strings or a comma-separated string, got {value!r}")


def parse_int_list(value: object) -> tuple[int, ...]:
    """A TOML array of integers or a comma-separated string of them."""
    items: list[object] = list(parse_str_list(value) if isinstance(value, str) else ())
    if not isinstance(value, str):
        if not isinstance(value, list | tuple):
            raise ValueError(f"expected a list of integers, got {value!r}")
        items = list(value)
    return tuple(parse_int(item) for item in items)


def parse_url_list(value: object) -> tuple[str, ...]:
    """Like ``parse_str_list``, each item an ``http://`` or ``https://`` URL with a host."""
    urls = parse_str_list(value)
    if not urls:
        raise ValueError("expected at least one URL")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected URLs like 'http://127.0.0.1:2379', got {url!r}")
        try:
            parts.port  # noqa: B018  (validates the port)
        except ValueError as e:
            raise ValueError(f"bad port in URL {url!r}") from e
    return urls


def parse_host_port(value: object) -> str:
    """A ``host:port`` string (the host may be empty, meaning all interfaces)."""
    text = parse_str(value)
    split_host_port(text)
    return text


def parse_optional_host_port(value: object) -> str:
    """``""`` (unset: the setting's documented fallback applies) or a ``host:port`` string."""
    text = parse_str(value)
    return text if text == "" else parse_host_port(text)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False
