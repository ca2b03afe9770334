"""JSON text exactly as TiDB prints a binary JSON (``BinaryJSON.MarshalJSON``).

TiDB writes ``{"a": [1, "2"], "b": true}``: ``", "`` between items, ``": "``
after keys, keys in UTF-8 byte order, floats in Go's shortest form (``4.0``
prints ``4``; exponent form below 1e-6 and from 1e21 up, as ``1e-7``,
``1e+21``), strings escaped like Go's encoder without HTML escaping.
Downstream writers use this so a JSON column reads the same through us as
through TiDB itself.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from decimal import Decimal

from tributary.tidbcodec.errors import EncodeError
from tributary.tidbcodec.json_binary import JsonOpaque, JsonValue

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def to_text(value: JsonValue) -> str:
    parts: list[str] = []
    _write(parts, value)
    return "".join(parts)


def _write(out: list[str], value: JsonValue) -> None:
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, str):
        out.append(quote(value))
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(", ")
            _write(out, item)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8", "surrogateescape"))
        for i, (key, item) in enumerate(items):
            if i:
                out.append(", ")
            out.append(quote(key))
            out.append(": ")
            _write(out, item)
        out.append("}")
    else:
        out.append(quote(_scalar_text(value)))


def _scalar_text(value: JsonValue) -> str:
    if isinstance(value, JsonOpaque):
        return f"base64:type{value.type_code}:{base64.b64encode(value.data).decode()}"
    if isinstance(value, dt.datetime):
        return f"{_ymd(value)} {value.hour:02d}:{value.minute:02d}:{value.second:02d}" + (
            f".{value.microsecond:06d}"
        )
    if isinstance(value, dt.date):
        return _ymd(value)
    if isinstance(value, dt.timedelta):
        micros = abs(value // dt.timedelta(microseconds=1))
        secs, frac = divmod(micros, 1_000_000)
        sign = "-" if value < dt.timedelta(0) else ""
        return f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.{frac:06d}"
    raise EncodeError(f"cannot print {type(value).__name__} as JSON")


def _ymd(d: dt.date) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def format_float(f: float) -> str:
    """Go's ES6-style float formatting used by encoding/json and TiDB."""
    if not math.isfinite(f):
        raise EncodeError(f"JSON cannot hold {f}")
    a = abs(f)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        text = repr(f)  # Python and Go agree on the shortest digits and 'e' layout
        mantissa, exp = text.split("e")
        if exp.startswith("-"):  # Go trims "e-07" to "e-7"
            exp = "-" + exp[1:].lstrip("0")
        return f"{mantissa}e{exp}"
    return format(Decimal(repr(f)).normalize(), "f")


def quote(s: str) -> str:
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20:
            out.append(f"\\u00{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:  # invalid UTF-8 carried by surrogateescape
            out.append("\\ufffd")
        elif code in (0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
