"""The front link (``services.pump.split``): frames round-trip, a batch is acknowledged only
once the writer stored it, refusals come back per binlog, and a broken link fails every
pending write as retriable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.pump.intake import Intake, Reason, WriteRefused, validate
from services.pump.metrics import RPC_BUCKETS, PumpMetrics
from services.pump.split.frames import (
    BadFrame,
    decode_ack,
    decode_items,
    decode_observed,
    encode_ack,
    encode_observed,
    encode_write,
)
from services.pump.split.link import WriterLink
from services.pump.split.local import listen_local, local_names
from services.pump.split.observations import FrontObservations
from services.pump.split.writer import WriterEnd
from services.pump.state import Action, PumpState
from services.pump.storage import Storage, StorageSettings
from tests.support.pump_binlogs import Clock, commit, prewrite, ts
from tributary.registry.status import NodeState

SMALL = StorageSettings(segment_size=1 << 20, stop_write_at_available_space=0)


def test_write_frame_round_trips_items() -> None:
    items = [prewrite(ts(1), value=b"v" * 300, ddl_job_id=7), commit(ts(1), ts(2))]
    body = encode_write(9, items)[13:]
    assert decode_items(body) == items
    with pytest.raises(BadFrame):
        decode_items(body[:-1])


def test_ack_frame_carries_each_refusal() -> None:
    refused = WriteRefused(Reason.NOT_ONLINE, "pump is not online", retriable=True)
    body = encode_ack(3, [None, refused])[13:]
    stored, back = decode_ack(body, 2)
    assert stored is None and back is not None
    assert (back.reason, str(back), back.retriable) == (Reason.NOT_ONLINE, str(refused), True)
    assert decode_ack(encode_ack(4, [None, None])[13:], 2) == [None, None]


def test_observations_travel_to_the_writers_histogram() -> None:
    """The worked example of ``split.observations``: 1 ms, 1 ms and 3 ms, then a failure."""
    front = FrontObservations(RPC_BUCKETS)
    for seconds in (0.001, 0.001, 0.003):
        front.observe("WriteBinlog", "succ", seconds)
    front.observe("WriteBinlog", "fail", 0.00001)
    observed = front.take()
    assert front.take() == []  # handed over once
    body = encode_observed(77, observed)[13:]
    assert decode_observed(body) == observed
    with pytest.raises(BadFrame):
        decode_observed(body[:-1])

    metrics = PumpMetrics()
    metrics.observe_rpc("WriteBinlog", "succ", 0.001)  # the writer's own
    metrics.merge_rpc(decode_observed(body))
    metrics.merge_rpc(decode_observed(body))  # a second front's
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name.startswith("binlog_pump_rpc_duration_seconds")
    }
    succ = (("label", "succ"), ("method", "WriteBinlog"))
    assert got["binlog_pump_rpc_duration_seconds_count", succ] == 7
    assert got["binlog_pump_rpc_duration_seconds_sum", succ] == pytest.approx(0.011)
    le = (("label", "succ"), ("le", "0.0016"), ("method", "WriteBinlog"))
    assert got["binlog_pump_rpc_duration_seconds_bucket", le] == 5
    fail = (("label", "fail"), ("method", "WriteBinlog"))
    assert got["binlog_pump_rpc_duration_seconds_count", fail] == 2


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[tuple[Storage, PumpState, str]]:
    name = local_names("writer")["writer"]
    async with Storage.open(tmp_path, SMALL, latest_ts=Clock()) as storage:
        state = PumpState(NodeState.ONLINE)
        end = WriterEnd(Intake(storage, state, 1 << 20))
        await end.start(name)
        try:
            yield storage, state, name
        finally:
            await end.close()


async def test_concurrent_writes_are_stored_before_their_ack(
    writer: tuple[Storage, PumpState, str],
) -> None:
    storage, _, name = writer
    link = await WriterLink.connect(name)
    try:
        txns = range(1, 41)
        results = await asyncio.gather(*(link.store([prewrite(ts(2 * i))]) for i in txns))
        assert all(r == [None] for r in results)
        results = await asyncio.gather(
            *(link.store([commit(ts(2 * i), ts(2 * i + 1))]) for i in txns)
        )
        assert all(r == [None] for r in results)
        assert storage.max_commit_ts == ts(81)
        for i in txns:
            assert await storage.get(ts(2 * i)) is not None
    finally:
        await link.close()


async def test_state_rules_apply_in_the_writer(writer: tuple[Storage, PumpState, str]) -> None:
    storage, state, name = writer
    state.request(Action.PAUSE)
    link = await WriterLink.connect(name)
    try:
        p, c = prewrite(ts(5)), commit(ts(3), ts(4))
        refused, stored = await link.store([p, c])
        assert refused is not None and refused.reason is Reason.NOT_ONLINE
        assert stored is None
        assert await storage.get(ts(5)) is None
    finally:
        await link.close()


async def test_a_broken_link_fails_pending_and_later_writes(tmp_path: Path) -> None:
    name = local_names("gone")["gone"]
    accepted: asyncio.Future[asyncio.StreamWriter] = asyncio.get_running_loop().create_future()

    async def swallow(_: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.set_result(w)

    server = await asyncio.start_unix_server(swallow, sock=listen_local(name))
    link = await WriterLink.connect(name)
    try:
        pending = asyncio.ensure_future(link.store([prewrite(ts(1))]))
        (await accepted).close()  # the writer dies with the batch unanswered
        with pytest.raises(WriteRefused) as e:
            await pending
        assert e.value.retriable and link.lost.is_set()
        with pytest.raises(WriteRefused):
            await link.store([prewrite(ts(2))])
    finally:
        await link.close()
        server.close()


def test_validate_is_stateless() -> None:
    assert validate(b"", 100) is None
    with pytest.raises(WriteRefused) as e:
        validate(prewrite(ts(1), value=b"x" * 200).payload, 100)
    assert e.value.reason is Reason.TOO_LARGE
