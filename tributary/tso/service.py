"""gRPC edge of the TSO: ``binlogext.Tso/GetTimestamps`` served by a TsoMember.

Maps member errors to gRPC statuses and nothing else: wrong cluster ID ->
FAILED_PRECONDITION, count out of range -> INVALID_ARGUMENT, not the leader or
temporarily unable -> UNAVAILABLE (the message names the leader's address).
"""

from __future__ import annotations

from grpclib import GRPCError
from grpclib.const import Status

from tributary.tso.allocator import MAX_COUNT
from tributary.tso.errors import TsoError
from tributary.tso.member import TsoMember
from tributary.wire.binlogext import TsoBase, TsoRequest, TsoResponse


class TsoService(TsoBase):
    """Add to any grpclib ``Server`` (the pump embeds it; services/tso runs only it)."""

    def __init__(self, member: TsoMember) -> None:
        self._member = member

    async def get_timestamps(self, tso_request: TsoRequest) -> TsoResponse:
        member = self._member
        if tso_request.cluster_id != member.cluster_id:
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                f"cluster ID mismatch: request has {tso_request.cluster_id}, "
                f"this TSO serves cluster {member.cluster_id}",
            )
        count = tso_request.count
        if not 1 <= count <= MAX_COUNT:
            raise GRPCError(
                Status.INVALID_ARGUMENT, f"count must be in [1, {MAX_COUNT}], got {count}"
            )
        try:
            last = await member.get_timestamps(count)
        except TsoError as e:
            status = Status.UNAVAILABLE if e.retriable else Status.INVALID_ARGUMENT
            raise GRPCError(status, str(e)) from e
        return TsoResponse(last=last, count=count)
