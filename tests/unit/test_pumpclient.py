"""PumpsClient against scripted pump peers (real grpclib servers on loopback),
with the pump records in the in-memory Kv."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from grpclib.const import Status

from tests.support.scripted_pump import ScriptedPump, running_pumps
from tests.support.waits import eventually
from tributary.coord.memory import MemoryKv
from tributary.pumpclient import (
    KvPumpSource,
    PumpChange,
    PumpClientError,
    PumpsClient,
    PumpSourceError,
)
from tributary.pumpclient.codec import encode_binlog
from tributary.registry.status import NodeKind, NodeState, NodeStatus, node_key
from tributary.wire.binlog import Binlog, BinlogType
from tributary.wire.peek import peek

P, C, R = (BinlogType(t) for t in (BinlogType.Prewrite, BinlogType.Commit, BinlogType.Rollback))
FAST: dict[str, Any] = {
    "retry_interval": 0.01,
    "probe_interval": 3600,
    "write_timeout": 5,
    "commit_timeout": 5,
}
ONE_IN_FLIGHT: dict[str, Any] = {"max_batches_in_flight": 1}  # the rest queue behind a held one


async def register(kv: MemoryKv, *peers: ScriptedPump, state: NodeState = NodeState.ONLINE) -> None:
    for peer in peers:
        await kv.put(node_key(NodeKind.PUMP, peer.node_id), peer.record(state).to_json())


def seen(peer: ScriptedPump) -> list[tuple[int, int, int]]:
    return [(int(h.tp), h.start_ts, h.commit_ts) for h in peer.binlogs()]


@pytest.fixture(params=[True, False], ids=["batch", "unary"])
def batch(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def test_no_pump_found() -> None:
    with pytest.raises(PumpClientError, match="no pump found"):
        async with PumpsClient(MemoryKv(), 1):
            pass


async def test_range_round_robin_and_pairing(batch: bool) -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b"), ScriptedPump("c")) as peers:
        kv = MemoryKv()
        await register(kv, *peers)
        async with PumpsClient(kv, 7, batch=batch, **FAST) as client:
            for ts in range(10, 16):
                await client.prewrite(ts, b"v%d" % ts, prewrite_key=b"k")
            assert client.pending_commits == 6
            for ts in range(10, 16):
                await client.commit(ts, ts + 100)
            assert client.pending_commits == 0
            await client.rollback(99)  # unknown txn: goes to every pump
        a, b, c = peers
        assert seen(a) == [(P, 10, 0), (P, 13, 0), (C, 10, 110), (C, 13, 113), (R, 99, 0)]
        assert seen(b) == [(P, 11, 0), (P, 14, 0), (C, 11, 111), (C, 14, 114), (R, 99, 0)]
        assert seen(c) == [(P, 12, 0), (P, 15, 0), (C, 12, 112), (C, 15, 115), (R, 99, 0)]
        assert {r.cluster_id for p in peers for r in p.received} == {7}
        assert {r.method for p in peers for r in p.received} == {"batch" if batch else "unary"}
        assert client.stats.prewrites_ok == 6
        assert (client.stats.commits_ok, client.stats.commits_unmatched) == (7, 1)


async def test_hash_selection_uses_start_ts() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b"), ScriptedPump("c")) as peers:
        kv = MemoryKv()
        await register(kv, *peers)
        async with PumpsClient(kv, 7, strategy="hash", **FAST) as client:
            for ts in (30, 31, 32, 33, 35):
                await client.prewrite(ts, b"v")
            for ts in (35, 30):
                await client.commit(ts, ts + 1)
        a, b, c = peers
        assert seen(a) == [(P, 30, 0), (P, 33, 0), (C, 30, 31)]
        assert seen(b) == [(P, 31, 0)]
        assert seen(c) == [(P, 32, 0), (P, 35, 0), (C, 35, 36)]


async def test_unknown_strategy_is_rejected() -> None:
    with pytest.raises(ValueError, match="strategy"):
        PumpsClient(MemoryKv(), 1, strategy="score")


async def test_retry_moves_to_another_pump(batch: bool) -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.errmsg = "disk full"
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, batch=batch, **FAST) as client:
            await client.prewrite(1, b"v")  # a refuses, b stores
            await client.commit(1, 2)  # follows the prewrite to b
            assert client.pumps.pumps["a"].err_num == 1
        assert seen(a) == []
        assert seen(b) == [(P, 1, 0), (C, 1, 2)]
        assert client.stats.retries == 1


async def test_grpc_failure_is_retried_on_the_next_pump() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.status = Status.UNAVAILABLE
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, **FAST) as client:
            await client.prewrite(1, b"v")
        assert seen(b) == [(P, 1, 0)]


async def test_resource_exhausted_is_not_retried(batch: bool) -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.status = Status.RESOURCE_EXHAUSTED
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, batch=batch, **FAST) as client:
            with pytest.raises(PumpClientError) as info:
                await client.prewrite(1, b"huge")
            assert not info.value.retriable
            assert client.stats.prewrites_failed == 1
        assert (b.unary_calls, b.batch_calls) == (0, 0)
        assert a.unary_calls + a.batch_calls == 1


async def test_write_fails_when_every_pump_fails() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.errmsg = b.errmsg = "not online: paused"
        kv = MemoryKv()
        await register(kv, a, b)
        fast = {**FAST, "write_timeout": 0.05}
        async with PumpsClient(kv, 7, **fast) as client:
            with pytest.raises(
                PumpClientError, match="write binlog failed, the last error"
            ) as raised:
                await client.prewrite(1, b"v")
            assert not raised.value.maybe_stored  # every pump refused it
            assert client.stats.prewrites_failed == 1
        # every attempt (the loop, then one last pass over all pumps) reached a pump
        assert a.batch_calls + b.batch_calls == client.stats.retries + 1 + 2


async def test_unusable_after_too_many_errors_and_probe_recovery() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.status = Status.UNAVAILABLE
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, **FAST) as client:
            pump_a = client.pumps.pumps["a"]
            ts = 1
            while "a" in client.pumps.available:
                await client.prewrite(ts, b"v")
                ts += 1
            assert pump_a.err_num == 11  # usable while err_num <= 10
            assert set(client.pumps.unavailable) == {"a"}
            calls_before = a.batch_calls
            for ts in range(100, 110):
                await client.prewrite(ts, b"v")
            assert a.batch_calls == calls_before  # no longer selected

            await client.probe_unavailable()  # still down: stays out
            assert set(client.pumps.unavailable) == {"a"}
            a.status = None
            await client.probe_unavailable()
            assert set(client.pumps.available) == {"a", "b"}
            assert pump_a.err_num == 0
            assert (client.stats.probes, client.stats.probe_recoveries) == (2, 1)
        probes = a.probes()
        assert len(probes) == 1 and probes[0].cluster_id == 7 and probes[0].method == "unary"


async def test_probe_loop_runs_by_itself() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, **{**FAST, "probe_interval": 0.02}) as client:
            pump_a = client.pumps.pumps["a"]
            pump_a.err_num = 11
            client.pumps.check_usable()
            assert "a" in client.pumps.unavailable
            await eventually(lambda: "a" in client.pumps.available)
        assert a.probes()


async def test_commit_retries_on_the_same_pump(batch: bool) -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, batch=batch, **FAST) as client:
            await client.prewrite(5, b"v")  # -> a
            a.fail_next = 3
            await client.commit(5, 6)
            assert client.stats.commits_ok == 1
        assert seen(a) == [(P, 5, 0), (C, 5, 6)]
        assert seen(b) == []


async def test_commit_never_raises_and_counts_failure() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        kv = MemoryKv()
        await register(kv, a, b)
        fast = {**FAST, "commit_timeout": 0.1}
        async with PumpsClient(kv, 7, **fast) as client:
            await client.prewrite(5, b"v")  # -> a
            a.errmsg = "gone"
            await client.commit(5, 6)  # gives up after commit_timeout, silently
            assert client.stats.commits_failed == 1
        assert seen(b) == []


async def test_unknown_commit_goes_to_every_available_pump() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b"), ScriptedPump("c")) as peers:
        kv = MemoryKv()
        await register(kv, *peers)
        async with PumpsClient(kv, 7, **FAST) as client:
            client.pumps.pumps["c"].err_num = 11
            client.pumps.check_usable()
            await client.commit(77, 78)
            assert client.stats.commits_unmatched == 1
        a, b, c = peers
        assert seen(a) == seen(b) == [(C, 77, 78)]
        assert seen(c) == []


async def test_timed_out_prewrite_pump_also_gets_the_commit() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.silent = True
        kv = MemoryKv()
        await register(kv, a, b)
        fast = {**FAST, "write_timeout": 0.2}
        async with PumpsClient(kv, 7, batch=False, **fast) as client:
            await client.prewrite(5, b"v")  # a: deadline (may have stored it); b: stored
            a.silent = False
            await client.commit(5, 6)
        assert seen(b) == [(P, 5, 0), (C, 5, 6)]
        assert seen(a) == [(C, 5, 6)]  # best-effort copy, so a's sorter is not held


async def test_commit_reaches_a_prewrite_pump_that_was_down_once_it_is_back() -> None:
    # a stored the prewrite and died before answering: it recovers the prewrite at restart,
    # and its max commit ts waits for the commit, which must not be given up while a is down
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.silent = True
        kv = MemoryKv()
        await register(kv, a, b)
        fast = {**FAST, "write_timeout": 0.2}
        async with PumpsClient(kv, 7, batch=False, **fast) as client:
            await client.prewrite(5, b"v")  # a: deadline (may have stored it); b: stored
            a.silent, a.status = False, Status.UNAVAILABLE  # down
            client.pumps.pumps["a"].err_num = 11  # other writes found it down too
            client.pumps.check_usable()
            await client.commit(5, 6)  # returns with b's copy; a's is left to retry
            assert (client.stats.commits_ok, client.stats.commits_deferred) == (1, 1)
            a.status = None  # back
            await eventually(lambda: client.stats.commits_late == 1)
        assert seen(b) == [(P, 5, 0), (C, 5, 6)]
        assert seen(a) == [(C, 5, 6)]


async def test_a_failed_prewrite_that_may_be_stored_says_so_and_its_rollback_follows() -> None:
    async with running_pumps(ScriptedPump("a")) as (a,):
        a.silent = True
        kv = MemoryKv()
        await register(kv, a)
        fast = {**FAST, "write_timeout": 0.2}
        async with PumpsClient(kv, 7, batch=False, **fast) as client:
            with pytest.raises(PumpClientError) as failed:
                await client.prewrite(5, b"v")  # deadlines only: a may hold it
            assert failed.value.maybe_stored
            a.silent = False
            await client.rollback(5)
            assert client.stats.commits_unmatched == 0
        assert seen(a) == [(R, 5, 0)]


async def test_closing_client_drops_a_pending_late_commit() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.silent = True
        kv = MemoryKv()
        await register(kv, a, b)
        fast = {**FAST, "write_timeout": 0.2}
        async with PumpsClient(kv, 7, batch=False, **fast) as client:
            await client.prewrite(5, b"v")
            a.silent, a.status = False, Status.UNAVAILABLE  # down
            await client.commit(5, 6)
            assert client.stats.commits_deferred == 1
        assert client.stats.commits_late == 0
        assert seen(a) == []


async def test_write_binlog_accepts_message_and_bytes() -> None:
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        async with PumpsClient(kv, 7, **FAST) as client:
            msg = Binlog(tp=P, start_ts=3, prewrite_key=b"k", prewrite_value=b"pv", ddl_job_id=9)
            await client.write_binlog(msg)
            await client.write_binlog(encode_binlog(int(C), 3, 4))
            with pytest.raises(PumpClientError, match="malformed") as info:
                await client.write_binlog(b"\xff\xff")
            assert not info.value.retriable
            with pytest.raises(PumpClientError, match="unsupported"):
                await client.write_binlog(Binlog(tp=BinlogType(BinlogType.PreDDL), start_ts=1))
        first = Binlog().parse(a.received[0].payload)
        assert (first.prewrite_key, first.prewrite_value, first.ddl_job_id) == (b"k", b"pv", 9)
        assert seen(a) == [(P, 3, 0), (C, 3, 4)]


async def test_writes_after_close_are_refused() -> None:
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        client = PumpsClient(kv, 7, **FAST)
        async with client:
            pass
        with pytest.raises(PumpClientError, match="not running"):
            await client.prewrite(1, b"v")


async def test_watch_adds_updates_and_removes_pumps() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        kv = MemoryKv()
        await register(kv, a)
        async with PumpsClient(kv, 7, **FAST) as client:
            await register(kv, b)
            await eventually(lambda: set(client.pumps.available) == {"a", "b"})
            for ts in (1, 2):
                await client.prewrite(ts, b"v")
            assert len(seen(a)) == len(seen(b)) == 1

            await register(kv, b, state=NodeState.PAUSED)
            await eventually(lambda: "b" in client.pumps.unavailable)
            for ts in (3, 4):
                await client.prewrite(ts, b"v")
            assert len(seen(b)) == 1

            client.pumps.pumps["b"].err_num = 5
            await register(kv, b)  # online again: available, errors forgiven
            await eventually(lambda: "b" in client.pumps.available)
            assert client.pumps.pumps["b"].err_num == 0

            await kv.delete(node_key(NodeKind.PUMP, "b"))
            await eventually(lambda: "b" not in client.pumps.pumps)
            assert set(client.pumps.available) == {"a"}

            # a new record that is already offline is ignored, as in TiDB
            await register(kv, b, state=NodeState.OFFLINE)
            await kv.put(b"/tidb-binlog/v1/pumps/zz", b"not json")  # skipped
            await register(kv, a, state=NodeState.CLOSING)
            await eventually(lambda: "a" in client.pumps.unavailable)
            assert "b" not in client.pumps.pumps and "zz" not in client.pumps.pumps


async def test_pump_moving_to_a_new_address_is_followed() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("a")) as (old, new):
        kv = MemoryKv()
        await register(kv, old)
        async with PumpsClient(kv, 7, **FAST) as client:
            await client.prewrite(1, b"v")
            await register(kv, new)  # same node id, new host:port
            await eventually(lambda: client.pumps.pumps["a"].transport.addr == new.addr)
            await client.commit(1, 2)
        assert seen(old) == [(P, 1, 0)]
        assert seen(new) == [(C, 1, 2)]


async def test_concurrent_writes_are_coalesced_into_few_rpcs() -> None:
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        async with PumpsClient(kv, 7, batch=True, **FAST, **ONE_IN_FLIGHT) as client:
            a.gate = asyncio.Event()
            writes = [asyncio.create_task(client.prewrite(ts, b"v")) for ts in range(1, 201)]
            await eventually(lambda: a.in_flight == 1)  # the first batch is held
            await asyncio.sleep(0.05)  # the rest queue up behind it
            a.gate.set()
            await asyncio.gather(*writes)
            commits = [client.commit(ts, ts + 1000) for ts in range(1, 201)]
            await asyncio.gather(*commits)
        assert sorted(h.start_ts for h in a.binlogs() if h.tp == P) == list(range(1, 201))
        assert len(a.binlogs()) == 400
        assert a.batch_calls < 20 and a.unary_calls == 0
        assert a.max_in_flight == 1  # never two batches at once on one pump
        assert client.stats.batched_binlogs == 400


async def test_by_default_two_batches_are_in_flight_on_one_pump() -> None:
    """The second batch is marshalled and sent while the pump stores the first; never a third."""
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        async with PumpsClient(kv, 7, batch=True, **FAST) as client:
            a.gate = asyncio.Event()
            writes = [asyncio.create_task(client.prewrite(ts, b"v")) for ts in range(1, 201)]
            await eventually(lambda: a.in_flight == 2)  # both held
            await asyncio.sleep(0.05)  # the rest queue up behind them
            assert a.in_flight == 2
            a.gate.set()
            await asyncio.gather(*writes)
        assert sorted(h.start_ts for h in a.binlogs()) == list(range(1, 201))
        assert a.max_in_flight == 2 and a.unary_calls == 0


async def test_batch_caps_split_batches() -> None:
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        async with PumpsClient(
            kv, 7, max_batch_count=8, max_batch_bytes=1000, **FAST, **ONE_IN_FLIGHT
        ) as client:
            a.gate = asyncio.Event()
            writes = [asyncio.create_task(client.prewrite(ts, b"v" * 300)) for ts in range(1, 31)]
            await eventually(lambda: a.in_flight == 1)
            await asyncio.sleep(0.05)
            a.gate.set()
            await asyncio.gather(*writes)
            await client.prewrite(99, b"x" * 5000)  # larger than the cap: travels alone
        assert max(a.batch_sizes) == 3  # 3 * ~310 bytes fit in 1000, 4 do not
        assert a.batch_sizes[-1] == 1
        assert len(a.binlogs()) == 31


async def test_batch_errmsgs_map_back_to_each_caller() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        # hash: even start_ts go to a first, odd ones to b; a refuses ts = 2 mod 4,
        # whose callers alone retry, on b ((ts + 1) % 2 == 1)
        a.verdict = lambda payload: "refused" if peek(payload).start_ts % 4 == 2 else None
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, strategy="hash", **FAST, **ONE_IN_FLIGHT) as client:
            a.gate = b.gate = asyncio.Event()
            writes = [asyncio.create_task(client.prewrite(ts, b"v")) for ts in range(40)]
            await eventually(lambda: a.in_flight == 1)
            await asyncio.sleep(0.05)
            a.gate.set()
            await asyncio.gather(*writes)
            assert client.stats.prewrites_ok == 40
        assert sorted(h.start_ts for h in a.binlogs()) == list(range(0, 40, 4))
        assert sorted(h.start_ts for h in b.binlogs()) == sorted(
            set(range(40)) - set(range(0, 40, 4))
        )
        assert max(a.batch_sizes) > 1  # refusals and successes shared a batch


async def test_per_binlog_codes_decide_retry_or_failure(batch: bool) -> None:
    """Our pump answers each refused binlog with a gRPC code: "too large" is
    final, "not online" (UNAVAILABLE) is retried on another pump."""
    stored, too_large, refused = [0, 6, 12], [2, 8, 14], [4, 10, 16]

    def verdict(payload: bytes) -> tuple[str, Status] | None:
        ts = peek(payload).start_ts
        if ts in too_large:
            return "binlog too large", Status.RESOURCE_EXHAUSTED
        if ts in refused:
            return "no online: paused", Status.UNAVAILABLE
        return None

    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        a.verdict = verdict
        kv = MemoryKv()
        await register(kv, a, b)
        async with PumpsClient(kv, 7, strategy="hash", batch=batch, **FAST) as client:
            a.gate = b.gate = asyncio.Event()
            writes = {
                ts: asyncio.create_task(client.prewrite(ts, b"v"))  # even ts: a first
                for ts in stored + too_large + refused
            }
            await eventually(lambda: a.in_flight >= 1)
            await asyncio.sleep(0.05)
            a.gate.set()
            await asyncio.gather(*writes.values(), return_exceptions=True)
            for ts in too_large:
                error = writes[ts].exception()
                assert isinstance(error, PumpClientError) and not error.retriable
            for ts in stored + refused:
                assert writes[ts].exception() is None
        assert sorted(h.start_ts for h in a.binlogs()) == stored
        assert sorted(h.start_ts for h in b.binlogs()) == refused
        if batch:
            assert max(a.batch_sizes) > 1


class FlakySource:
    """A PumpSource whose watch breaks once; the next listing differs."""

    def __init__(self, first: list[NodeStatus], second: list[NodeStatus]) -> None:
        self.listings = [first, second]
        self.lists = 0
        self.changes: asyncio.Queue[PumpChange] = asyncio.Queue()

    async def list_pumps(self) -> list[NodeStatus]:
        self.lists += 1
        return self.listings[min(self.lists, 2) - 1]

    async def watch_pumps(self) -> AsyncIterator[PumpChange]:
        if self.lists == 1:
            raise PumpSourceError("watch broke")
        while True:
            yield await self.changes.get()


async def test_broken_watch_lists_again_and_reconciles() -> None:
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b"), ScriptedPump("c")) as peers:
        a, b, c = peers
        source = FlakySource([a.record()], [b.record()])
        async with PumpsClient(source, 7, **FAST) as client:
            assert set(client.pumps.pumps) == {"a"}
            await eventually(lambda: set(client.pumps.pumps) == {"b"})
            source.changes.put_nowait(PumpChange("c", c.record()))
            await eventually(lambda: set(client.pumps.available) == {"b", "c"})
            source.changes.put_nowait(PumpChange("b", None))
            await eventually(lambda: set(client.pumps.pumps) == {"c"})
            await client.prewrite(1, b"v")
        assert seen(c) == [(P, 1, 0)]


@pytest.mark.parametrize("go_style", [True, False], ids=["go-server", "grpclib-server"])
async def test_fallback_to_unary_for_a_pump_without_batch_service(go_style: bool) -> None:
    async with running_pumps(ScriptedPump("go", batch=False, go_style=go_style)) as (go,):
        kv = MemoryKv()
        await register(kv, go)
        async with PumpsClient(kv, 7, batch=True, **FAST) as client:
            await client.prewrite(1, b"v")
            assert not client.pumps.pumps["go"].transport.batch_supported
            go.gate = asyncio.Event()
            writes = [asyncio.create_task(client.prewrite(ts, b"v")) for ts in range(2, 12)]
            await eventually(lambda: go.in_flight == 10)  # unary calls pipeline
            go.gate.set()
            await asyncio.gather(*writes)
            await client.commit(1, 2)
            assert client.stats.batch_rpcs == 1  # only the first try
            assert client.stats.prewrites_ok == 11
        assert [r.method for r in go.received] == ["unary"] * 12
        assert seen(go)[-1] == (C, 1, 2)
        assert client.pumps.pumps == {}  # closed with the client


async def test_unary_path_pipelines_concurrent_calls() -> None:
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        async with PumpsClient(kv, 7, batch=False, **FAST) as client:
            a.gate = asyncio.Event()
            writes = [asyncio.create_task(client.prewrite(ts, b"v")) for ts in range(1, 21)]
            await eventually(lambda: a.in_flight == 20)
            a.gate.set()
            await asyncio.gather(*writes)
        assert a.unary_calls == 20 and a.batch_calls == 0


async def test_kv_source_misses_nothing_between_list_and_watch() -> None:
    kv = MemoryKv()
    source = KvPumpSource(kv)
    assert await source.list_pumps() == []
    a, b = ScriptedPump("a"), ScriptedPump("b")
    a.port, b.port = 1, 2
    await register(kv, a)  # after the listing, before the watch starts
    await kv.put(node_key(NodeKind.PUMP, "bad"), b"{")  # unreadable: skipped
    await register(kv, b)
    await kv.delete(node_key(NodeKind.PUMP, "a"))
    changes: list[PumpChange] = []
    watch = source.watch_pumps()
    async with asyncio.timeout(10):
        async for change in watch:
            changes.append(change)
            if len(changes) == 3:
                break
    await watch.aclose()  # type: ignore[attr-defined]
    assert changes == [
        PumpChange("a", a.record()),
        PumpChange("b", b.record()),
        PumpChange("a", None),
    ]
    assert [s.node_id for s in await source.list_pumps()] == ["b"]
