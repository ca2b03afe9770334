"""ensure_cluster_id / read_cluster_id over MemoryKv."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tributary.coord.cluster_id import (
    CLUSTER_ID_KEY,
    ClusterIdError,
    ensure_cluster_id,
    parse_cluster_id,
    random_cluster_id,
    read_cluster_id,
)
from tributary.coord.memory import MemoryKv

KEY = CLUSTER_ID_KEY.encode()


async def test_created_once_then_read_back() -> None:
    kv = MemoryKv()
    assert await read_cluster_id(kv) is None
    created = await ensure_cluster_id(kv)
    assert 0 < created < 2**64
    stored = await kv.get(KEY)
    assert stored is not None and stored.value == str(created).encode()
    assert await ensure_cluster_id(kv) == created
    assert await read_cluster_id(kv) == created
    assert stored.version == 1


async def test_racing_callers_all_get_the_first_writers_id() -> None:
    kv = MemoryKv()
    proposals = itertools.count(1000)
    ids = await asyncio.gather(*(ensure_cluster_id(kv, lambda: next(proposals)) for _ in range(8)))
    assert len(set(ids)) == 1
    stored = await kv.get(KEY)
    assert stored is not None and stored.version == 1  # written exactly once
    # Each MemoryKv call yields to the loop, so every caller proposed before any wrote.
    assert next(proposals) == 1008


@pytest.mark.parametrize(
    "raw", [b"", b"abc", b"0", b"-5", b"+5", b" 5", b"1.0", b"18446744073709551616", b"\xff"]
)
async def test_malformed_stored_value_is_a_clear_error(raw: bytes) -> None:
    kv = MemoryKv()
    await kv.put(KEY, raw)
    with pytest.raises(ClusterIdError, match="malformed cluster ID") as err:
        await ensure_cluster_id(kv)
    assert not err.value.retriable
    with pytest.raises(ClusterIdError):
        await read_cluster_id(kv)


def test_parse_accepts_the_full_range() -> None:
    assert parse_cluster_id(b"1") == 1
    assert parse_cluster_id(b"18446744073709551615") == 2**64 - 1


def test_random_ids_are_nonzero_and_vary() -> None:
    ids = {random_cluster_id() for _ in range(20)}
    assert 0 not in ids and len(ids) > 1


async def test_a_nonsense_proposal_is_refused() -> None:
    with pytest.raises(ValueError):
        await ensure_cluster_id(MemoryKv(), lambda: 0)
