"""The coordination-store port implemented over a real etcd (aetcd's gRPC stubs).

Invariant: every failure leaving this module is a ``KvError`` raised from the
original error, retriable exactly when a retry may help (unavailable, deadline,
overload); watches follow ``coord.etcd_watch`` (once each, in order, resumed
after a stream break).

aetcd's ``Client`` owns the gRPC channel; we call its stubs directly because its
high-level API drops the response revision (needed by ``put``/``txn``) and
multiplexes every watch over one shared stream that a single failure tears down.
The client talks to one member at a time, first the first of ``endpoints`` that
answers, and moves to the next when that one stops answering (``coord.etcd_members``):
reads, puts, leases and their keepalives, and watches carry on while a quorum is up.
A mutation sent again after an attempt with an unknown outcome never answers wrongly:
a txn whose compares then fail, or a delete that then finds nothing, raises
``OutcomeUnknown`` (the first attempt may have done it).
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
    open_stream,
    range_end,
    settle,
)
from tributary.coord.etcd_members import Member, Members
from tributary.coord.etcd_watch import watch_events
from tributary.coord.kv import (
    Compare,
    CompareOp,
    Delete,
    KeyValue,
    KvError,
    OutcomeUnknown,
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
    """``coord.kv.Kv`` over the members of one etcd cluster. Build with ``EtcdKv.connect``."""

    def __init__(self, members: Members) -> None:
        self._members = members
        self._live_watches: set[object] = set()

    @property
    def endpoint(self) -> str:
        """The member requests go to now."""
        return self._members.current.endpoint

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        endpoints: Sequence[str],
        timeout: float = 5.0,  # noqa: ASYNC109 (a per-call deadline, not a scope timeout)
        attempt_timeout: float = 0.75,
    ) -> AsyncIterator[EtcdKv]:
        """Start with the first reachable endpoint (tried in order); close on exit.

        ``timeout`` (seconds) bounds every call, failover included; with more than one
        endpoint each attempt on one member gets at most ``attempt_timeout`` (seconds)
        before the next member is tried. Raises a retriable KvError when no endpoint answers.
        """
        kv = await cls._open(
            [endpoints] if isinstance(endpoints, str) else list(endpoints),
            timeout,
            attempt_timeout,
        )
        try:
            yield kv
        finally:
            await kv.close()

    @classmethod
    async def _open(cls, endpoints: list[str], deadline: float, attempt: float) -> EtcdKv:
        if not endpoints:
            raise ValueError("no etcd endpoints given")
        addresses = [_host_port(endpoint) for endpoint in endpoints]
        members: list[Member] = []
        try:
            for endpoint, (host, port) in zip(endpoints, addresses, strict=True):
                client = aetcd.Client(
                    host=host, port=port, timeout=deadline, options=CHANNEL_OPTIONS
                )
                await client.connect()  # builds the channel; no I/O yet
                members.append(Member(endpoint, client))
            found = Members(members, 0, deadline, attempt)

            async def probe(m: Member, timeout: float, resent: bool) -> None:  # noqa: ASYNC109
                await m.status(timeout)

            try:
                await found.call("connect", probe)
            except KvError as e:
                raise KvError(
                    f"no etcd endpoint reachable in {endpoints}", retriable=e.retriable
                ) from e
            log.info("connected to etcd at %s", found.current.endpoint)
            return cls(found)
        except BaseException:
            for member in members:
                await member.client.close()
            raise

    async def close(self) -> None:
        await self._members.close()
        # Let watches wind down, including ones dropped unclosed (the loop closes
        # those in a task of its own), so closing leaves no task behind.
        await settle(also=lambda: not self._live_watches)

    async def get(self, key: bytes) -> KeyValue | None:
        async def attempt(m: Member, timeout: float, resent: bool) -> Any:  # noqa: ASYNC109
            return await m.kv.Range(rpc.RangeRequest(key=key), timeout=timeout, metadata=m.metadata)

        resp = await self._members.call("get", attempt)
        return _key_value(resp.kvs[0]) if resp.kvs else None

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        req = rpc.RangeRequest(key=prefix, range_end=range_end(prefix))

        async def attempt(m: Member, timeout: float, resent: bool) -> Any:  # noqa: ASYNC109
            return await m.kv.Range(req, timeout=timeout, metadata=m.metadata)

        resp = await self._members.call("get_prefix", attempt)
        return [_key_value(kv) for kv in resp.kvs]

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        """Sent again on another member after an unknown outcome: the value is the same."""
        req = rpc.PutRequest(key=key, value=value, lease=lease)

        async def attempt(m: Member, timeout: float, resent: bool) -> Any:  # noqa: ASYNC109
            return await m.kv.Put(req, timeout=timeout, metadata=m.metadata)

        resp = await self._members.call("put", attempt)
        return int(resp.header.revision)

    async def delete(self, key: bytes) -> bool:
        req = rpc.DeleteRangeRequest(key=key)

        async def attempt(m: Member, timeout: float, resent: bool) -> Any:  # noqa: ASYNC109
            resp = await m.kv.DeleteRange(req, timeout=timeout, metadata=m.metadata)
            if resent and resp.deleted == 0:
                raise OutcomeUnknown(f"etcd delete of {key!r}: sent again, found nothing")
            return resp

        resp = await self._members.call("delete", attempt)
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
        writes = bool(success or failure)

        async def attempt(m: Member, timeout: float, resent: bool) -> Any:  # noqa: ASYNC109
            resp = await m.kv.Txn(req, timeout=timeout, metadata=m.metadata)
            if resent and writes and not resp.succeeded:
                raise OutcomeUnknown(
                    "etcd txn sent again after an unknown outcome and its compares failed"
                )
            return resp

        resp = await self._members.call("txn", attempt)
        return TxnResult(bool(resp.succeeded), int(resp.header.revision))

    async def grant_lease(self, ttl_seconds: int) -> EtcdLease:
        """Sent again after an unknown outcome: a lease granted twice leaves the unused
        one to expire with its ttl."""
        req = rpc.LeaseGrantRequest(TTL=ttl_seconds)

        async def attempt(m: Member, timeout: float, resent: bool) -> Any:  # noqa: ASYNC109
            return await m.lease.LeaseGrant(req, timeout=timeout, metadata=m.metadata)

        resp = await self._members.call("lease grant", attempt)
        if resp.error:
            raise KvError(f"etcd lease grant failed: {resp.error}", retriable=False)
        return EtcdLease(self, int(resp.ID), int(resp.TTL))

    async def _keepalive(self, lease_id: int) -> None:
        async def attempt(m: Member, timeout: float, resent: bool) -> Any:  # noqa: ASYNC109
            call = open_stream(m.lease.LeaseKeepAlive(timeout=timeout, metadata=m.metadata))
            try:
                await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                await call.done_writing()
                resp = await call.read()
                await call.code()  # etcd ends the stream once we stop writing
                return resp
            finally:
                await finish_stream(call)

        resp = await self._members.call("lease keepalive", attempt)
        if resp is grpc.aio.EOF or resp.TTL <= 0:
            raise KvError(f"lease {lease_id:x} has expired", retriable=False)

    async def _revoke(self, lease_id: int) -> None:
        req = rpc.LeaseRevokeRequest(ID=lease_id)

        async def attempt(m: Member, timeout: float, resent: bool) -> None:  # noqa: ASYNC109
            try:
                await m.lease.LeaseRevoke(req, timeout=timeout, metadata=m.metadata)
            except grpc.aio.AioRpcError as e:
                if e.code() is not grpc.StatusCode.NOT_FOUND:
                    raise
                # already expired or revoked (maybe by an earlier attempt): the keys are gone

        await self._members.call("lease revoke", attempt)

    def watch_prefix(
        self, prefix: bytes, start_revision: int = 0
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events under ``prefix`` with revision >= ``start_revision`` (0: from when
        iteration starts). Close with ``contextlib.aclosing`` or by cancelling the
        consumer; a compacted start revision raises a non-retriable KvError. The stream
        re-opens on the current member when its own fails or is abandoned."""
        return watch_events(self._members, prefix, start_revision, self._live_watches)
