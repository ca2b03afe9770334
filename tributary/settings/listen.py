"""Where a server listens and how others reach it: ``addr`` and ``advertise-addr``.

Declared inline (``group(ListenSettings, ..., inline=True, default=ListenSettings(...))``), so
the keys stay top-level as in tidb-binlog's pump.toml and drainer.toml; each service gives its
own default address. An empty ``advertise-addr`` (tidb-binlog's stock files say
``advertise-addr = ""``) means "derive it": the listen host, or for a wildcard listen host the
machine's first non-loopback IPv4 address, worked out when the node binds
(``servicekit.net.advertise_for``). Invariant: ``advertise`` is never empty, and an explicitly
configured wildcard is reported by ``wildcard_advertise``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.settings.kinds import HOST_PORT, OPTIONAL_HOST_PORT
from tributary.settings.model import setting


@dataclass(frozen=True)
class ListenSettings:
    """The listen address and the address advertised to other nodes."""

    addr: str = setting(
        "127.0.0.1:0", "listen address (host:port; port 0 = any free port)", kind=HOST_PORT
    )
    advertise_addr: str = setting(
        "",
        "address other nodes and clients use to reach this one (empty: addr's host, or for "
        "0.0.0.0 this machine's first non-loopback IPv4 address, with the bound port)",
        kind=OPTIONAL_HOST_PORT,
    )

    @property
    def advertise(self) -> str:
        """The configured address, else ``addr`` (before a wildcard host is derived)."""
        return self.advertise_addr or self.addr

    @property
    def wildcard_advertise(self) -> bool:
        """Whether ``advertise-addr`` was set to a wildcard host (peers cannot reach that)."""
        host = self.advertise_addr.rsplit(":", 1)[0]
        return bool(self.advertise_addr) and host in ("", "0.0.0.0", "::", "[::]")
