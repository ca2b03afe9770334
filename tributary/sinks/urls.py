"""Sink URLs: the password (and an S3 sink's keys) is never shown in a message, and an unknown
option is refused."""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import SplitResult, parse_qsl, quote, unquote_plus, urlsplit

from tributary.sinks.port import SinkError


def redact(url: str | SplitResult, mask: str = "******") -> str:
    """``url`` with its password masked: ``mysql://u:secret@h:1/`` -> ``mysql://u:******@h:1/``.

    The capture's OpenAPI passes TiCDC's mask, ``xxxxx``, so its answers read as TiCDC's."""
    parts = urlsplit(url) if isinstance(url, str) else url
    query = _redact_query(parts.query, mask)
    if parts.password is None and query == parts.query:
        return url if isinstance(url, str) else url.geturl()
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:{mask}@{host}")
    return parts._replace(query=query).geturl()


_URL_OPTIONS = ("schema-registry",)  # query options whose value is a URL with a password
_SECRET_OPTIONS = ("access-key", "secret-access-key", "session-token")  # s3:// credentials


def _redact_query(query: str, mask: str) -> str:
    """``query`` with the password of each URL-valued option (``schema-registry``) and the
    value of each credential option (``secret-access-key``, ...) masked."""
    if not any(k + "=" in query for k in (*_URL_OPTIONS, *_SECRET_OPTIONS)):
        return query
    out = []
    for part in query.split("&"):
        key, eq, value = part.partition("=")
        if eq and unquote_plus(key) in _SECRET_OPTIONS:
            part = f"{key}={mask}"
        elif eq and unquote_plus(key) in _URL_OPTIONS:
            inner = unquote_plus(value)
            masked = redact(inner, mask) if "://" in inner else inner
            if masked != inner:
                part = f"{key}={quote(masked, safe=':/@*')}"
        out.append(part)
    return "&".join(out)


def unknown_options(url: SplitResult, known: Collection[str]) -> str:
    """What is wrong with ``url``'s query keys that are not in ``known`` ("" if none is): each
    such key named, and the known ones listed."""
    keys = [k for k, _ in parse_qsl(url.query, keep_blank_values=True)]
    unknown = sorted({k for k in keys if k not in known})
    if not unknown:
        return ""
    names = ", ".join(repr(k) for k in unknown)
    options = "options" if len(unknown) > 1 else "option"
    takes = f"the known options are {', '.join(sorted(known))}" if known else "it takes no options"
    return f"unknown {options} {names}; {takes}"


def refuse_unknown_options(kind: str, url: SplitResult, known: Collection[str]) -> None:
    """Raise a SinkError if ``url``'s query holds a key not in ``known`` (an option we do not
    understand is never silently ignored)::

        sqlite sink URL 'sqlite:///x.db?mode=ro': unknown option 'mode'; it takes no options
    """
    problem = unknown_options(url, known)
    if problem:
        raise SinkError(f"{kind} sink URL {redact(url)!r}: {problem}")
