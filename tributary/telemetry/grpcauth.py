"""``cert-allowed-cn`` enforcement for grpclib servers.

grpclib dispatches a ``RecvRequest`` event before any handler runs; its ``peer.cert()`` is the
client certificate the TLS handshake verified. The listener registered here raises
``GRPCError(UNAUTHENTICATED)`` when that certificate has no allowed Common Name (see
``telemetry.tls`` for why the check cannot happen inside the handshake). Invariant: with a
non-empty allow list no RPC handler runs for a disallowed or certificate-less peer.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from grpclib.const import Status
from grpclib.events import RecvRequest, listen
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from tributary.telemetry.tls import cn_allowed, common_names

log = logging.getLogger(__name__)


def enforce_allowed_cn(server: Server, allowed_cns: Collection[str]) -> None:
    """Refuse RPCs from clients whose certificate CN is not in ``allowed_cns`` (no-op if empty)."""
    if not allowed_cns:
        return
    allowed = frozenset(allowed_cns)

    async def check_peer(event: RecvRequest) -> None:
        cert = event.peer.cert()
        if cn_allowed(cert, allowed):
            return
        names = ", ".join(common_names(cert)) or "no client certificate"
        log.warning(
            "refused %s from %s: certificate CN not allowed (%s)",
            event.method_name,
            event.peer.addr(),
            names,
        )
        raise GRPCError(Status.UNAUTHENTICATED, f"client certificate CN not allowed ({names})")

    listen(server, RecvRequest, check_peer)
