"""Sink URLs in messages: the password is never shown."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def redact(url: str | SplitResult, mask: str = "******") -> str:
    """``url`` with its password masked: ``mysql://u:secret@h:1/`` -> ``mysql://u:******@h:1/``.

    The capture's OpenAPI passes TiCDC's mask, ``xxxxx``, so its answers read as TiCDC's."""
    parts = urlsplit(url) if isinstance(url, str) else url
    if parts.password is None:
        return url if isinstance(url, str) else url.geturl()
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:{mask}@{host}").geturl()
