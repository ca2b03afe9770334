"""The binlogctl commands: async functions from settings to a result value.

Each command opens what it needs (etcd, a TSO client, an HTTP session), does one
job and closes it again; ``run`` dispatches on ``CtlConfig.command``. Invariant:
errors the operator can act on leave as ``CtlError`` (etcd, registry, TLS and TSO
failures are mapped here, at the boundary); nothing is printed here, progress of
long waits goes through the ``progress`` callback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from services.binlogctl import actions, export, meta
from services.binlogctl.actions import Progress
from services.binlogctl.config import Command, CtlConfig
from services.binlogctl.errors import CtlError, EtcdUnreachable, NodeNotFound, singular
from services.binlogctl.results import (
    ActionApplied,
    Encrypted,
    MetaWritten,
    NodeList,
    Result,
    StateUpdated,
)
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv, KvError
from tributary.encrypt import encrypt
from tributary.registry.registry import NodeNotFoundError, NodeRegistry, RegistryError
from tributary.registry.status import NodeKind, NodeState, NodeStatus, StatusError
from tributary.telemetry.tls import ALPN_HTTP, TlsError, client_context
from tributary.tso.cluster import discover
from tributary.tso.errors import TsoError

log = logging.getLogger(__name__)

TSO_TIMEOUT = 10.0  # seconds generate_meta waits for a timestamp


def _ignore(_: str) -> None:
    pass


async def run(cfg: CtlConfig, progress: Progress = _ignore) -> Result:
    """Run the configured command."""
    command = cfg.command
    kind = command.kind
    try:
        if command is Command.GENERATE_META:
            return await generate_meta(cfg)
        if command is Command.ENCRYPT:
            return encrypt_text(cfg.text)
        if command is Command.EXPORT_DRAINER_STATE:
            async with connect(cfg) as kv:
                return await export.export_state(cfg, kv)
        assert kind is not None
        if command.verb == "list":
            return await list_nodes(cfg, kind)
        if command.verb == "catchup":
            return await request_catchup(cfg, cfg.node_id)
        if command.verb == "update":
            return await update_state(cfg, kind, cfg.node_id, NodeState(cfg.state))
        return await apply_action(cfg, kind, cfg.node_id, command.verb, progress)
    except KvError as e:
        raise CtlError(f"etcd request failed: {e}", retriable=e.retriable) from e
    except StatusError as e:
        raise CtlError(str(e)) from e


@asynccontextmanager
async def connect(cfg: CtlConfig) -> AsyncIterator[Kv]:
    """etcd at ``--pd-urls``; an ``EtcdUnreachable`` when no endpoint answers."""
    async with AsyncExitStack() as stack:
        try:
            kv = await stack.enter_async_context(EtcdKv.connect(list(cfg.pd_urls)))
        except KvError as e:
            raise EtcdUnreachable(cfg.pd_urls, e) from e
        yield kv


async def find_node(registry: NodeRegistry, kind: NodeKind, node_id: str) -> NodeStatus:
    status = await registry.get(kind, node_id)
    if status is None:
        known = [s.node_id for s in await registry.list(kind)]
        raise NodeNotFound(kind, node_id, known)
    return status


async def list_nodes(cfg: CtlConfig, kind: NodeKind) -> NodeList:
    async with connect(cfg) as kv:
        every = await NodeRegistry(kv).list(kind)
    shown = [s for s in every if cfg.show_offline_nodes or s.state is not NodeState.OFFLINE]
    return NodeList(kind, tuple(shown), len(every) - len(shown))


async def update_state(
    cfg: CtlConfig, kind: NodeKind, node_id: str, state: NodeState
) -> StateUpdated:
    async with connect(cfg) as kv:
        registry = NodeRegistry(kv)
        before = await find_node(registry, kind, node_id)
        try:
            after = await registry.set_state(kind, node_id, state)
        except NodeNotFoundError as e:  # deleted since we read it
            raise NodeNotFound(kind, node_id, []) from e
        except RegistryError as e:
            raise CtlError(str(e), retriable=e.retriable) from e
    return StateUpdated(kind, before, after)


async def request_catchup(cfg: CtlConfig, node_id: str) -> ActionApplied:
    """``catchup-drainer``: ``PUT /catchup`` on the drainer's HTTP API (no waiting: a catch-up
    takes as long as its Spark job; the drainer's ``/status`` shows its progress)."""
    try:
        ssl_context = client_context(cfg.security, alpn=ALPN_HTTP, check_hostname=False)
    except TlsError as e:
        raise CtlError(str(e)) from e
    async with connect(cfg) as kv:
        node = await find_node(NodeRegistry(kv), NodeKind.DRAINER, node_id)
    address = actions.status_address(node, cfg.status_addr)
    url = actions.catchup_url(address, tls=ssl_context is not None)
    accepted = await actions.request_action(NodeKind.DRAINER, node_id, url, ssl_context)
    return ActionApplied(NodeKind.DRAINER, node_id, "catchup", url, accepted, None)


async def apply_action(
    cfg: CtlConfig, kind: NodeKind, node_id: str, verb: str, progress: Progress = _ignore
) -> ActionApplied:
    """Ask the node to pause (``verb="pause"``) or go offline, then wait if configured."""
    try:
        ssl_context = client_context(cfg.security, alpn=ALPN_HTTP, check_hostname=False)
    except TlsError as e:
        raise CtlError(str(e)) from e
    async with connect(cfg) as kv:
        registry = NodeRegistry(kv)
        node = await find_node(registry, kind, node_id)
        address = actions.status_address(node, cfg.status_addr)
        url = actions.state_url(address, node_id, verb, tls=ssl_context is not None)
        log.info("requesting %s of %s %s at %s", verb, kind.value, node_id, url)
        accepted = await actions.request_action(kind, node_id, url, ssl_context)
        progress(f"{singular(kind)} {node_id} accepted {verb}: {accepted}")
        final = None
        if cfg.wait:
            target = actions.ACTIONS[verb]
            final = await actions.wait_for_state(
                registry, kind, node_id, target, cfg.timeout, progress
            )
    return ActionApplied(kind, node_id, verb, url, accepted, final)


def encrypt_text(text: str) -> Encrypted:
    """``encrypt``: no etcd, only the key (``$BINLOG_SECRET_KEY`` or tidb-binlog's default)."""
    try:
        return Encrypted(encrypt(text))
    except ValueError as e:  # a bad BINLOG_SECRET_KEY
        raise CtlError(str(e)) from e


async def generate_meta(cfg: CtlConfig) -> MetaWritten:
    """A fresh TSO timestamp written as ``<data-dir>/savepoint``."""
    async with connect(cfg) as kv:
        clock = await discover(kv, cfg.pd_urls)
        if clock.cluster_id is None:
            raise CtlError(
                f"etcd at {', '.join(cfg.pd_urls)} holds no cluster ID: no pump or TSO "
                f"service has run against it, so there is no TSO to ask"
            )
        try:
            async with clock.tso(kv, timeout=TSO_TIMEOUT) as tso:
                commit_ts = await tso.get_ts()
        except TsoError as e:
            raise CtlError(
                f"no timestamp from the TSO (is a pump or binlog-tso running?): {e}",
                retriable=e.retriable,
            ) from e
    text = meta.savepoint_text(commit_ts, cfg.zone(), cfg.time_zone or "local")
    try:
        path = await asyncio.to_thread(meta.write_savepoint, Path(cfg.data_dir), text)
    except OSError as e:
        raise CtlError(f"cannot write the savepoint in {cfg.data_dir}: {e}") from e
    return MetaWritten(path, commit_ts, text)
