"""Where a server listens and how others reach it: ``addr`` and ``advertise-addr``.

Declared inline (``group(ListenSettings, ..., inline=True, default=ListenSettings(...))``), so
the keys stay top-level as in tidb-binlog's pump.toml and drainer.toml; each service gives its
own default address. Invariant: ``advertise`` is the address a peer is told, never empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.settings.kinds import HOST_PORT
from tributary.settings.model import setting


@dataclass(frozen=True)
class ListenSettings:
    """The listen address and the address advertised to other nodes."""

    addr: str = setting(
        "127.0.0.1:0", "listen address (host:port; port 0 = any free port)", kind=HOST_PORT
    )
    advertise_addr: str = setting(
        "", "address other nodes and clients use to reach this one (default: addr)", kind=HOST_PORT
    )

    @property
    def advertise(self) -> str:
        return self.advertise_addr or self.addr
