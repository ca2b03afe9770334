"""gRPC edge of the TSO for PD clients: the ``GetMembers`` and ``Tso`` calls of ``pdpb.PD``.

A PD client (PD's Go client, TiDB's pump client) starts with ``GetMembers`` on every URL it
was given: the cluster ID is the response header's, the leader's ``client_urls`` is where it
opens one ``Tso`` stream, and every member's ``client_urls`` replaces its URL list (so it can
find the next leader when this one goes). Members are the TSO members campaigning in the
election, the leader first.

Invariant (PD's, which the client checks): a ``TsoResponse`` carries the **last** of the
``count`` timestamps allocated, so the client's first is ``logical - count + 1``; they come
from the one leader's allocator, so they only go up. Errors follow PD: wrong cluster ID ->
FAILED_PRECONDITION, not the leader or no timestamp now -> UNAVAILABLE (the client then asks
``GetMembers`` for the new leader), a bad count -> INVALID_ARGUMENT.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

from grpclib import GRPCError
from grpclib.const import Status

from tributary.coord.kv import KvError
from tributary.tso.allocator import MAX_COUNT
from tributary.tso.errors import TsoError
from tributary.tso.member import TsoMember
from tributary.wire import ts
from tributary.wire.pdpb import (
    GetMembersRequest,
    GetMembersResponse,
    Member,
    PdBase,
    ResponseHeader,
    Timestamp,
    TsoRequest,
    TsoResponse,
)


def member_id(advertise_addr: str) -> int:
    """A stable nonzero uint64 for a member, from its address (PD's are random per member)."""
    digest = hashlib.sha256(advertise_addr.encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


class PdService(PdBase):
    """Add to the gRPC server that already serves ``member`` (binlog-tso, or a pump)."""

    def __init__(self, member: TsoMember, *, tls: bool = False) -> None:
        self._member = member
        self._scheme = "https" if tls else "http"

    def _pd_member(self, addr: str) -> Member:
        url = f"{self._scheme}://{addr}"
        return Member(name=addr, member_id=member_id(addr), peer_urls=[url], client_urls=[url])

    def _header(self) -> ResponseHeader:
        return ResponseHeader(cluster_id=self._member.cluster_id)

    async def get_members(self, get_members_request: GetMembersRequest) -> GetMembersResponse:
        try:
            addrs = await self._member.members()
        except KvError as e:
            status = Status.UNAVAILABLE if e.retriable else Status.INTERNAL
            raise GRPCError(status, f"cannot read the TSO members: {e}") from e
        members = [self._pd_member(addr) for addr in addrs]
        reply = GetMembersResponse(header=self._header(), members=members)
        if members:  # no leader field at all while none is elected, as PD answers then
            reply.leader = reply.etcd_leader = members[0]
        return reply

    async def tso(
        self, tso_request_iterator: AsyncIterator[TsoRequest]
    ) -> AsyncIterator[TsoResponse]:
        member = self._member
        async for request in tso_request_iterator:
            cluster_id = request.header.cluster_id if request.header else 0
            if cluster_id != member.cluster_id:
                raise GRPCError(
                    Status.FAILED_PRECONDITION,
                    f"mismatch cluster id, need {member.cluster_id} but got {cluster_id}",
                )
            count = request.count
            if not 1 <= count <= MAX_COUNT:
                raise GRPCError(
                    Status.INVALID_ARGUMENT, f"tso count must be in [1, {MAX_COUNT}], got {count}"
                )
            try:
                last = await member.get_timestamps(count)
            except TsoError as e:
                status = Status.UNAVAILABLE if e.retriable else Status.INVALID_ARGUMENT
                raise GRPCError(status, f"not leader or no timestamp: {e}") from e
            stamp = Timestamp(physical=ts.physical_ms(last), logical=ts.logical(last))
            yield TsoResponse(header=self._header(), count=count, timestamp=stamp)
