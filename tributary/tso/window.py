"""The TSO window kept in the coordination store, writable only by the current leader.

Invariant: a save succeeds only while the saving leader's election key still
exists with the create revision it won with (an etcd transaction guard), so a
deposed leader can never move the window after a new leader has read it. Each
save also compares the window key's mod revision with the one this store last
read or wrote, so a save can never land twice or out of order: a request the
store gave up on (its etcd member froze) that the member applies when it wakes
finds the key moved and changes nothing, instead of putting an older window back.
The value is the window's physical time as decimal milliseconds text.
"""

from __future__ import annotations

from tributary.coord.kv import Compare, CompareOp, Kv, KvError, OutcomeUnknown, Put
from tributary.tso.errors import NotLeader, TsoError
from tributary.tso.keys import TIMESTAMP_KEY


class KvWindowStore:
    """WindowStore on a Kv, guarded by the leader's election key."""

    def __init__(self, kv: Kv, guard: Compare, key: bytes = TIMESTAMP_KEY) -> None:
        self._kv = kv
        self._guard = guard
        self._key = key
        self._rev: int | None = None  # mod revision of the window key as last seen (0: absent)

    async def load(self) -> int | None:
        try:
            found = await self._kv.get(self._key)
        except KvError as e:
            raise TsoError(f"cannot read the TSO window: {e}", retriable=e.retriable) from e
        self._rev = 0 if found is None else found.mod_revision
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
        if self._rev is None:
            await self.load()
        assert self._rev is not None
        value = str(window_ms).encode("ascii")
        unchanged = (
            Compare(self._key, CompareOp.MOD_REVISION_EQUAL, self._rev)
            if self._rev
            else Compare(self._key, CompareOp.VERSION_EQUAL, 0)
        )
        try:
            result = await self._kv.txn([self._guard, unchanged], [Put(self._key, value)])
            succeeded, rev = result.succeeded, result.revision
        except OutcomeUnknown:
            succeeded, rev = await self._settle(value)
        except KvError as e:
            raise TsoError(f"cannot save the TSO window: {e}", retriable=e.retriable) from e
        if not succeeded:
            raise NotLeader(None)
        self._rev = rev

    async def _settle(self, value: bytes) -> tuple[bool, int]:
        """After an unknown outcome: the save applied iff the key holds our value and
        we still lead (nobody else writes the window while our guard holds)."""
        try:
            found = await self._kv.get(self._key)
            guard = await self._kv.get(self._guard.key)
        except KvError as e:
            raise TsoError(f"cannot check the TSO window: {e}", retriable=e.retriable) from e
        ours = guard is not None and guard.mod_revision == self._guard.target
        if found is not None and found.value == value and ours:
            return True, found.mod_revision
        return False, 0
