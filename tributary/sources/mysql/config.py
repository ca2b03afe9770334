"""How to reach the upstream MySQL/MariaDB and what to read from it.

``SourceConfig.from_uri("mysql://root:pw@127.0.0.1:3306/?server-id=99&tz=Asia/Shanghai")``:
user and password are percent-decoded; the port defaults to 3306; query parameters are
``server-id`` (the replica id this reader registers with; distinct from every other replica
of the server) and ``tz`` (the zone TIMESTAMP values are shown in). Unknown parameters are an
error, so a typo does not silently fall back to a default. ``heartbeat`` and ``resolve_idle``
are chosen by the program that reads (the capture asks for resolved ts, ``resolved``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from tributary.change import TableFilter


@dataclass(frozen=True)
class SourceConfig:
    host: str
    port: int
    user: str
    password: str
    server_id: int = 4242
    filter: TableFilter | None = None
    tz: str = "UTC"
    heartbeat: float = 5.0  # seconds of binlog silence before the server sends a heartbeat
    resolve_idle: bool = False  # yield resolved-ts markers while caught up (``resolved``)

    @classmethod
    def from_uri(cls, uri: str, *, filter: TableFilter | None = None) -> SourceConfig:
        parts = urlsplit(uri)
        uri = _without_password(parts)  # errors below name the URI, never its password
        if parts.scheme.lower() not in ("mysql", "mariadb"):
            raise ValueError(f"source URI must be mysql://, got {uri!r}")
        if not parts.hostname:
            raise ValueError(f"source URI has no host: {uri!r}")
        params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        unknown = sorted(set(params) - {"server-id", "tz"})
        if unknown:
            raise ValueError(f"unknown source URI parameters {unknown} in {uri!r}")
        try:
            port = parts.port or 3306
            server_id = int(params.get("server-id", "4242"))
        except ValueError as e:
            raise ValueError(f"bad source URI {uri!r}: {e}") from e
        if not 0 < server_id < 1 << 32:
            raise ValueError(f"server-id must be in [1, 2^32), got {server_id}")
        return cls(
            host=parts.hostname,
            port=port,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            server_id=server_id,
            filter=filter,
            tz=params.get("tz", "UTC") or "UTC",
        )


def _without_password(parts: SplitResult) -> str:
    """The URI with its password masked (``tributary.sinks.urls.redact``; sources do not import
    sinks)."""
    if parts.password is None:
        return parts.geturl()
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:******@{host}").geturl()
