"""``pause-*``/``offline-*``: ask a running node through its HTTP API, then follow etcd.

Where the HTTP API is: a node's record holds only its advertised gRPC address
(``host``), and the record's JSON must stay tidb-binlog's, so it gains no field.
Pumps and drainers serve HTTP on their gRPC port (as tidb-binlog does; ``status-addr``
only adds a listener), so the default target is the record's address itself, and
``--status-addr`` names another one explicitly.

Invariant: the request is sent once; a node that answers anything but success
leaves a ``CtlError`` naming the URL and the node's own message. Waiting only
reads etcd: success is the record reaching the target state (paused/offline);
reaching the other one instead is an error (``online``, ``pausing`` and
``closing`` are passed through: the record lags the request by up to one
heartbeat); the deadline is a ``WaitTimedOut`` (the node keeps working on it).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from urllib.parse import quote

import aiohttp

from services.binlogctl.errors import CtlError, WaitTimedOut, singular
from tributary.net import join_host_port, split_host_port
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus

Progress = Callable[[str], None]

ACTIONS = {"pause": NodeState.PAUSED, "offline": NodeState.OFFLINE}
"""binlogctl verb -> the state the node ends in."""
_HTTP_ACTION = {"pause": "pause", "offline": "close"}
_REQUEST_TIMEOUT = 30.0  # seconds for the one PUT
# After the session closes, a TLS connection it closed on release still runs its shutdown
# handshake; binlogctl's event loop ends right after the PUT, so it waits this long for that to
# finish (aiohttp's "graceful shutdown" advice) instead of leaving the socket to the collector.
_TLS_CLOSE_GRACE = 0.25
_PROGRESS_EVERY = 10.0  # seconds between "still waiting" lines
_SETTLED = frozenset({NodeState.PAUSED, NodeState.OFFLINE})  # states a node stays in


def status_address(node: NodeStatus, override: str = "") -> str:
    """``host:port`` of the node's HTTP API: ``override``, else the registered address.

    ``NodeStatus(addr="10.0.0.5:8250")`` -> ``"10.0.0.5:8250"``;
    ``"[fd00::5]:8250"`` -> ``"[fd00::5]:8250"``.
    """
    if override:
        return override
    try:
        host, port = split_host_port(node.addr)
    except ValueError as e:
        raise CtlError(
            f"{node.node_id}'s record has no usable address ({node.addr!r}); pass --status-addr"
        ) from e
    if not 0 < port <= 65535:
        raise CtlError(f"{node.node_id}'s registered port {port} is not usable; pass --status-addr")
    return join_host_port(host, port)


def state_url(address: str, node_id: str, verb: str, tls: bool) -> str:
    scheme = "https" if tls else "http"
    return f"{scheme}://{address}/state/{quote(node_id, safe=':@')}/{_HTTP_ACTION[verb]}"


def catchup_url(address: str, tls: bool) -> str:
    """The drainer's catch-up trigger (``catchup-drainer``)."""
    return f"{'https' if tls else 'http'}://{address}/catchup"


async def request_action(
    kind: NodeKind, node_id: str, url: str, ssl_context: ssl.SSLContext | None
) -> str:
    """PUT the action; the state the node answered with (``pausing``/``closing``)."""
    noun = singular(kind)
    timeout = aiohttp.ClientTimeout(total=_REQUEST_TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.put(url, ssl=ssl_context if ssl_context is not None else True) as reply,
        ):
            body = await reply.text()
            status = reply.status
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        await _tls_closed(ssl_context)
        raise CtlError(
            f"cannot reach {noun} {node_id} at {url}: {e or type(e).__name__}. If the process "
            f"is dead, repair its record with update-{noun}; if its HTTP API is not on its "
            f"gRPC port, pass --status-addr",
            retriable=True,
        ) from e
    await _tls_closed(ssl_context)
    message = _error_message(body)
    if status == 200:
        return _answered_state(body, default="requested")
    if status == 404:
        raise CtlError(f"{url} is not {noun} {node_id}'s HTTP API ({message}); pass --status-addr")
    if status == 409:
        raise CtlError(f"{noun} {node_id} refused: {message}")
    raise CtlError(f"{noun} {node_id} answered HTTP {status} at {url}: {message}")


async def _tls_closed(ssl_context: ssl.SSLContext | None) -> None:
    await asyncio.sleep(_TLS_CLOSE_GRACE if ssl_context is not None else 0)


def _error_message(body: str) -> str:
    try:
        doc = json.loads(body)
    except ValueError:
        return body.strip()[:200]
    error = doc.get("error") if isinstance(doc, dict) else None
    return error if isinstance(error, str) else body.strip()[:200]


def _answered_state(body: str, default: str) -> str:
    try:
        doc = json.loads(body)
    except ValueError:
        return default
    state = doc.get("state") if isinstance(doc, dict) else None
    return state if isinstance(state, str) else default


async def wait_for_state(
    registry: NodeRegistry,
    kind: NodeKind,
    node_id: str,
    target: NodeState,
    timeout: float,  # noqa: ASYNC109 (seconds; expiry becomes a WaitTimedOut with context)
    progress: Progress,
    poll: float = 0.5,
) -> NodeStatus:
    """Poll etcd until the node's record shows ``target``; that record."""
    noun = singular(kind)
    loop = asyncio.get_running_loop()
    start = loop.time()
    last_state: NodeState | None = None
    last_report = start
    status: NodeStatus | None = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                status = await registry.get(kind, node_id)
                if status is None:
                    raise CtlError(f"{noun} {node_id}'s record disappeared from etcd")
                if status.state is target:
                    return status
                now = loop.time()
                if status.state is not last_state and status.state is not NodeState.ONLINE:
                    progress(f"{noun} {node_id}: {status.state.value}")
                    last_state, last_report = status.state, now
                elif now - last_report >= _PROGRESS_EVERY:
                    progress(_still(noun, node_id, status, now - start))
                    last_report = now
                if status.state in _SETTLED:
                    raise CtlError(
                        f"{noun} {node_id} became {status.state.value} instead of {target.value}"
                    )
                await asyncio.sleep(poll)
    except TimeoutError:
        shown = status.state.value if status is not None else "unknown"
        raise WaitTimedOut(
            f"{noun} {node_id} is still {shown} after {timeout:.0f} s; the request stands "
            f"and the {noun} keeps working on it (see `binlogctl {kind.value}`"
            + (" and `binlogctl drainers`)" if target is NodeState.OFFLINE else ")")
        ) from None


def _still(noun: str, node_id: str, status: NodeStatus, elapsed: float) -> str:
    why = ""
    if status.state is NodeState.CLOSING and noun == "pump":
        why = "; waiting until every drainer has consumed its binlogs"
    return f"{noun} {node_id}: still {status.state.value} after {elapsed:.0f} s{why}"
