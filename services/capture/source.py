"""The upstream change log as a processor sees it: a narrow port, and the errors it raises.

A ``ChangeSource`` gives the current end of the upstream log as a position token and opens a
stream of whole transactions after a token. Each ``SourceItem`` carries the token to resume
*after* that transaction; commit ts are assigned by the source deterministically from the log
(so a replay from the same token and ``last_ts`` yields the same ts), which is what lets sinks
drop what they already applied. A resolved item (an empty txn with ``resolved`` set) says no
later transaction will have a ts at or below its own: the checkpoint may move there without
writing to the sink. ``services.capture.mysql`` adapts ``mysqlsource`` to it; unit
tests use an in-memory fake.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from tributary.cdc.errors import CaptureError
from tributary.change import TableFilter, Txn


class SourceFailure(CaptureError):
    """The upstream could not be read; ``retriable`` as the source said."""


@dataclass(frozen=True, slots=True)
class SourceItem:
    txn: Txn
    position: str  # where to resume after this transaction
    resolved: bool = False  # a resolved-ts marker: no transaction, nothing to apply


class ChangeSource(Protocol):
    async def current_position(self) -> str:
        """The token of the end of the upstream log now."""
        ...

    async def tables(self, table_filter: TableFilter | None) -> list[tuple[str, str]]:
        """The upstream's tables now, ``(schema, table)``, those ``table_filter`` passes (and
        never a system schema's)."""
        ...

    def reached(self, position: str, end: str) -> bool:
        """Whether a reader standing at ``position`` has read everything up to ``end``."""
        ...

    def open(
        self, start: str, last_ts: int, table_filter: TableFilter | None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Transactions after ``start`` (``last_ts``: the commit ts given to the one before it),
        forever; raises SourceFailure."""
        ...
