"""The deployment's cluster ID: one random nonzero uint64, kept in the store.

Invariant: the ID is written at most once (a txn guarded on "key absent"), so
every caller, however many race at first start, returns the same value, and it
never changes afterwards. It is stored as decimal text at ``CLUSTER_ID_KEY``
(beside the node records under tidb-binlog's ``/tidb-binlog/v1`` root); anything
else there is an error, never silently replaced.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from tributary.coord.kv import Compare, CompareOp, Kv, KvError, Put

log = logging.getLogger(__name__)

CLUSTER_ID_KEY = "/tidb-binlog/v1/cluster_id"
_KEY = CLUSTER_ID_KEY.encode()
_MAX = 2**64 - 1
_ATTEMPTS = 5


class ClusterIdError(KvError):
    """The stored cluster ID is not a decimal uint64 in 1..2**64-1."""

    retriable = False


def parse_cluster_id(raw: bytes) -> int:
    text = raw.decode("ascii", errors="replace")
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= _MAX:
        raise ClusterIdError(
            f"malformed cluster ID at {CLUSTER_ID_KEY}: {raw[:40]!r} "
            f"(want a decimal integer in 1..{_MAX}); fix or delete the key"
        )
    return int(text)


def random_cluster_id() -> int:
    while True:
        value = secrets.randbits(64)
        if value:
            return value


async def read_cluster_id(kv: Kv) -> int | None:
    """The stored ID, or None if the deployment has none yet."""
    found = await kv.get(_KEY)
    return None if found is None else parse_cluster_id(found.value)


async def ensure_cluster_id(kv: Kv, generate: Callable[[], int] = random_cluster_id) -> int:
    """Return the deployment's ID, creating it first if there is none.

    Racing callers each propose their own random ID; the txn lets exactly one
    proposal in, and the losers read the winner's.
    """
    for _ in range(_ATTEMPTS):
        existing = await read_cluster_id(kv)
        if existing is not None:
            return existing
        proposal = generate()
        if not 0 < proposal <= _MAX:
            raise ValueError(f"cluster ID must be in 1..{_MAX}, got {proposal}")
        absent = Compare(_KEY, CompareOp.VERSION_EQUAL, 0)
        result = await kv.txn([absent], [Put(_KEY, str(proposal).encode())])
        if result.succeeded:
            log.info("created cluster ID %d at %s", proposal, CLUSTER_ID_KEY)
            return proposal
        # Lost the race (or the key was deleted right after): read again.
    raise KvError(f"cluster ID at {CLUSTER_ID_KEY} kept changing; gave up after {_ATTEMPTS} tries")
