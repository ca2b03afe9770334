"""Errors of the pump client.

Invariant: callers see exactly one exception type, :class:`PumpClientError`,
whose ``retriable`` attribute says whether writing the same binlog again later
may succeed; transport failures are classified by gRPC status code (never by
message text) into :class:`RpcFailure` before they reach the retry logic.
"""

from __future__ import annotations

from tributary.errors import TributaryError


class PumpClientError(TributaryError):
    """Writing a binlog (or starting the client) failed.

    ``maybe_stored``: a P-binlog that failed may still be held by a pump whose
    answer was lost (a broken call, a deadline); its writer must then follow it
    with a rollback binlog, which the client sends to those pumps.
    """

    retriable = True

    def __init__(
        self, *args: object, retriable: bool | None = None, maybe_stored: bool = False
    ) -> None:
        super().__init__(*args, retriable=retriable)
        self.maybe_stored = maybe_stored


class RpcFailure(TributaryError):
    """One RPC to one pump failed.

    ``retriable``: another attempt (on this or another pump) may succeed.
    ``uncertain``: the pump may have stored the binlog anyway (timeout, lost
    connection), so a later C-binlog should also be offered to this pump.
    ``reset``: the connection is suspect and should be re-established.
    ``elsewhere``: the pump refused without storing anything because it cannot
    take prewrites now (not online, cut from etcd, disk nearly full): a P-binlog
    moves on to another pump at once instead of waiting to try again.
    """

    def __init__(
        self,
        message: str,
        *,
        retriable: bool = True,
        uncertain: bool = False,
        reset: bool = False,
        elsewhere: bool = False,
    ) -> None:
        super().__init__(message, retriable=retriable)
        self.uncertain = uncertain
        self.reset = reset
        self.elsewhere = elsewhere
