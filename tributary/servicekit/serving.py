"""Start a node's gRPC server with its ops HTTP API on the same port, and on ``status-addr``.

tidb-binlog serves both on one port (pump 8250, drainer 8249), where its binlogctl, TiUP and
tidb-operator look for ``/status``, ``/state/...`` and ``/metrics``: the registry record's
address is the HTTP API's address too. ``status-addr``, when set, serves the same API on an
extra listener of its own. Invariant: the HTTP port returned is one that answers the API.
"""

from __future__ import annotations

import socket

from grpclib.server import Server

from tributary.settings.security import SecuritySettings
from tributary.telemetry.http import OpsServer
from tributary.telemetry.oneport import share_port
from tributary.telemetry.tls import ALPN_ONE_PORT, server_context


async def serve_grpc_and_http(
    server: Server,
    sock: socket.socket,
    ops: OpsServer,
    security: SecuritySettings,
    status_addr: str,
) -> int:
    """Serve ``server`` on ``sock`` (gRPC and the HTTP API) and ``ops`` on ``status_addr`` too
    when it is set; the HTTP port to report (``status-addr``'s if set, else the shared one).

    The caller closes both: ``server.close()`` stops the shared listener, ``ops.close()`` ends
    the HTTP connections wherever they were accepted.
    """
    share_port(server, await ops.protocol_factory())
    await server.start(sock=sock, ssl=server_context(security, alpn=ALPN_ONE_PORT))
    if status_addr:
        return await ops.start()
    return int(sock.getsockname()[1])
