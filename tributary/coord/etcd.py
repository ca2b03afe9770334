"""The coordination-store port implemented over a real etcd (aetcd's gRPC stubs).

Invariant: every failure leaving this module is a ``KvError`` raised from the
original error, retriable exactly when a retry may help (unavailable, deadline,
overload); watches follow ``coord.etcd_watch`` (once each, in order, resumed
after a stream break).

aetcd's ``Client`` owns the gRPC channel; we call its stubs directly because its
high-level API drops the response revision (needed by ``put``/``txn``) and
multiplexes every watch over one shared stream that a single failure tears down.
The client talks to one endpoint: the first of ``endpoints`` that answers.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aetcd
import grpc  # type: ignore[import-untyped]
from aetcd import rpc

from tributary.coord.etcd_grpc import (
    CHANNEL_OPTIONS,
    finish_stream,
    mapped_error,
    mapping,
    open_stream,
    range_end,
    settle,
)
from tributary.coord.etcd_watch import watch_events
from tributary.coord.kv import (
    Compare,
    CompareOp,
    Delete,
    KeyValue,
    KvError,
    Put,
    TxnResult,
    WatchEvent,
)
from tributary.net import AddressError, split_endpoint

log = logging.getLogger(__name__)


def _host_port(endpoint: str) -> tuple[str, int]:
    try:
        host, port = split_endpoint(endpoint.strip(), schemes=("http",), default_port=2379)
    except AddressError as e:
        raise KvError(f"bad etcd endpoint: {e}", retriable=False) from e
    # aetcd builds its gRPC target as f"{host}:{port}": an IPv6 host keeps its brackets.
    return (f"[{host}]" if ":" in host else host), port


def _key_value(kv: Any) -> KeyValue:
    return KeyValue(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)


def _compare(c: Compare) -> Any:
    msg = rpc.Compare(key=c.key, result=rpc.Compare.EQUAL)
    if c.op is CompareOp.VALUE_EQUAL:
        if not isinstance(c.target, bytes):
            raise TypeError(f"value compare needs bytes, got {c.target!r}")
        msg.target, msg.value = rpc.Compare.VALUE, c.target
    else:
        if not isinstance(c.target, int):
            raise TypeError(f"{c.op.value} compare needs an int, got {c.target!r}")
        if c.op is CompareOp.MOD_REVISION_EQUAL:
            msg.target, msg.mod_revision = rpc.Compare.MOD, c.target
        else:
            msg.target, msg.version = rpc.Compare.VERSION, c.target
    return msg


def _request_op(op: Put | Delete) -> Any:
    if isinstance(op, Put):
        return rpc.RequestOp(request_put=rpc.PutRequest(key=op.key, value=op.value, lease=op.lease))
    return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=op.key))


class EtcdLease:
    """A lease granted by etcd; ``refresh`` sends one keepalive."""

    def __init__(self, owner: EtcdKv, lease_id: int, ttl: int) -> None:
        self._owner = owner
        self._id = lease_id
        self.ttl = ttl

    @property
    def id(self) -> int:
        return self._id

    async def refresh(self) -> None:
        await self._owner._keepalive(self._id)

    async def revoke(self) -> None:
        await self._owner._revoke(self._id)


class EtcdKv:
    """``coord.kv.Kv`` over one etcd endpoint. Build with ``EtcdKv.connect``."""

    def __init__(self, client: aetcd.Client, endpoint: str, timeout: float) -> None:
        self._client = client
        self.endpoint = endpoint
        self._timeout = timeout
        self._closed = False
        self._live_watches: set[object] = set()
        self._kv = rpc.KVStub(client.channel)
        self._lease = rpc.LeaseStub(client.channel)
        self._watch = rpc.WatchStub(client.channel)

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        endpoints: Sequence[str],
        timeout: float = 5.0,  # noqa: ASYNC109 (a per-call deadline, not a scope timeout)
    ) -> AsyncIterator[EtcdKv]:
        """Connect to the first reachable endpoint (tried in order); close on exit.

        ``timeout`` (seconds) bounds the reachability probe and every unary call.
        Raises a retriable KvError when no endpoint answers.
        """
        kv = await cls._open(
            [endpoints] if isinstance(endpoints, str) else list(endpoints), timeout
        )
        try:
            yield kv
        finally:
            await kv.close()

    @classmethod
    async def _open(cls, endpoints: list[str], deadline: float) -> EtcdKv:
        if not endpoints:
            raise ValueError("no etcd endpoints given")
        failure: grpc.aio.AioRpcError | None = None
        for endpoint in endpoints:
            host, port = _host_port(endpoint)
            client = aetcd.Client(host=host, port=port, timeout=deadline, options=CHANNEL_OPTIONS)
            await client.connect()  # builds the channel; no I/O yet
            try:
                await rpc.MaintenanceStub(client.channel).Status(
                    rpc.StatusRequest(), timeout=deadline
                )
            except grpc.aio.AioRpcError as e:
                log.warning("etcd endpoint %s unreachable: %s", endpoint, e.code().name)
                failure = e
                await client.close()
                continue
            except BaseException:
                await client.close()
                raise
            log.info("connected to etcd at %s", endpoint)
            return cls(client, endpoint, deadline)
        assert failure is not None
        raise KvError(f"no etcd endpoint reachable in {endpoints}") from failure

    async def close(self) -> None:
        self._closed = True
        await self._client.close()
        # Let watches wind down, including ones dropped unclosed (the loop closes
        # those in a task of its own), so closing leaves no task behind.
        await settle(also=lambda: not self._live_watches)

    def _call_args(self) -> dict[str, Any]:
        return {"timeout": self._timeout, "metadata": self._client.metadata}

    async def get(self, key: bytes) -> KeyValue | None:
        with mapping("get"):
            resp = await self._kv.Range(rpc.RangeRequest(key=key), **self._call_args())
        return _key_value(resp.kvs[0]) if resp.kvs else None

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        req = rpc.RangeRequest(key=prefix, range_end=range_end(prefix))
        with mapping("get_prefix"):
            resp = await self._kv.Range(req, **self._call_args())
        return [_key_value(kv) for kv in resp.kvs]

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        with mapping("put"):
            req = rpc.PutRequest(key=key, value=value, lease=lease)
            resp = await self._kv.Put(req, **self._call_args())
        return int(resp.header.revision)

    async def delete(self, key: bytes) -> bool:
        with mapping("delete"):
            resp = await self._kv.DeleteRange(rpc.DeleteRangeRequest(key=key), **self._call_args())
        return bool(resp.deleted > 0)

    async def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Put | Delete],
        failure: Sequence[Put | Delete] = (),
    ) -> TxnResult:
        req = rpc.TxnRequest(
            compare=[_compare(c) for c in compare],
            success=[_request_op(op) for op in success],
            failure=[_request_op(op) for op in failure],
        )
        with mapping("txn"):
            resp = await self._kv.Txn(req, **self._call_args())
        return TxnResult(bool(resp.succeeded), int(resp.header.revision))

    async def grant_lease(self, ttl_seconds: int) -> EtcdLease:
        with mapping("lease grant"):
            req = rpc.LeaseGrantRequest(TTL=ttl_seconds)
            resp = await self._lease.LeaseGrant(req, **self._call_args())
        if resp.error:
            raise KvError(f"etcd lease grant failed: {resp.error}", retriable=False)
        return EtcdLease(self, int(resp.ID), int(resp.TTL))

    async def _keepalive(self, lease_id: int) -> None:
        call = open_stream(self._lease.LeaseKeepAlive(**self._call_args()))
        try:
            with mapping("lease keepalive"):
                await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                await call.done_writing()
                resp = await call.read()
                await call.code()  # etcd ends the stream once we stop writing
        finally:
            await finish_stream(call)
        if resp is grpc.aio.EOF or resp.TTL <= 0:
            raise KvError(f"lease {lease_id:x} has expired", retriable=False)

    async def _revoke(self, lease_id: int) -> None:
        try:
            await self._lease.LeaseRevoke(rpc.LeaseRevokeRequest(ID=lease_id), **self._call_args())
        except grpc.aio.AioRpcError as e:
            if e.code() is grpc.StatusCode.NOT_FOUND:
                return  # already expired or revoked: the keys are gone either way
            raise mapped_error("lease revoke", e) from e

    def watch_prefix(
        self, prefix: bytes, start_revision: int = 0
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events under ``prefix`` with revision >= ``start_revision`` (0: from when
        iteration starts). Close with ``contextlib.aclosing`` or by cancelling the
        consumer; a compacted start revision raises a non-retriable KvError."""
        return watch_events(
            self._watch,
            self._client.metadata,
            prefix,
            start_revision,
            lambda: self._closed,
            self._live_watches,
        )
