"""The TSO window kept in the coordination store, writable only by the current leader.

Invariant: a save succeeds only while the saving leader's election key still
exists with the create revision it won with (an etcd transaction guard), so a
deposed leader can never move the window after a new leader has read it.
The value is the window's physical time as decimal milliseconds text.
"""

from __future__ import annotations

from tributary.coord.kv import Compare, Kv, KvError, Put
from tributary.tso.errors import NotLeader, TsoError
from tributary.tso.keys import TIMESTAMP_KEY


class KvWindowStore:
    """WindowStore on a Kv, guarded by the leader's election key."""

    def __init__(self, kv: Kv, guard: Compare, key: bytes = TIMESTAMP_KEY) -> None:
        self._kv = kv
        self._guard = guard
        self._key = key

    async def load(self) -> int | None:
        try:
            found = await self._kv.get(self._key)
        except KvError as e:
            raise TsoError(f"cannot read the TSO window: {e}", retriable=e.retriable) from e
        if found is None:
            return None
        try:
            return int(found.value.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as e:
            raise TsoError(
                f"TSO window at {self._key!r} is not decimal milliseconds: {found.value!r}",
                retriable=False,
            ) from e

    async def save(self, window_ms: int) -> None:
        put = Put(self._key, str(window_ms).encode("ascii"))
        try:
            result = await self._kv.txn([self._guard], [put])
        except KvError as e:
            raise TsoError(f"cannot save the TSO window: {e}", retriable=e.retriable) from e
        if not result.succeeded:
            raise NotLeader(None)
