"""The workload generator's error root.

Every failure the generator reports is a ``WorkloadError``; ``retriable`` says whether running
the transaction again (as a new transaction, with a new start ts) may succeed. Upstream driver
errors are mapped where they are raised (by MySQL error number or SQLite result code, never by
message text): a deadlock, a lock wait timeout or a duplicate key between concurrent writers is
a :class:`Conflict`; a dropped connection is :class:`ConnectionLost`; anything else is a plain
``UpstreamError`` (a bug in the generated SQL, a missing privilege: not retriable).
"""

from __future__ import annotations

from tributary.errors import TributaryError


class WorkloadError(TributaryError):
    """The workload could not do what it was asked; ``retriable`` says if a retry may help."""


class UpstreamError(WorkloadError):
    """A statement on the upstream database failed."""


class Conflict(UpstreamError):
    """Concurrent writers collided (deadlock, lock wait timeout, duplicate key): retry anew."""

    retriable = True


class ConnectionLost(UpstreamError):
    """The upstream connection broke; the transaction is gone (never committed by us)."""

    retriable = True


class Abort(WorkloadError):
    """The transaction's plan no longer applies (its table was dropped or renamed meanwhile)."""

    retriable = True


class HistoryDiverged(WorkloadError):
    """A DDL ran upstream but its job or its binlog could not be recorded: stop the workload."""
