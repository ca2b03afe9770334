"""EtcdKv against a real etcd: endpoint choice, error mapping, and a watch that
outlives an etcd restart."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing

import aetcd
import pytest

from tests.support.etcd import EtcdProcess, run_etcd
from tests.support.net import free_port
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import KvError, WatchEvent, WatchEventKind

PUT = WatchEventKind.PUT
WAIT = 30.0


async def until_ok(op: Callable[[], Awaitable[int]]) -> int:
    """Retry ``op`` on retriable KvError until it succeeds (etcd is coming back)."""
    async with asyncio.timeout(WAIT):
        while True:
            try:
                return await op()
            except KvError as e:
                if not e.retriable:
                    raise
                await asyncio.sleep(0.1)


async def test_connect_skips_unreachable_endpoints(etcd: EtcdProcess) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with EtcdKv.connect([dead, f"{etcd.host}:{etcd.port}"], timeout=2.0) as kv:
        assert kv.endpoint == f"{etcd.host}:{etcd.port}"
        rev = await kv.put(b"/k", b"v")
        got = await kv.get(b"/k")
        assert got is not None and got.mod_revision == rev


async def test_connect_fails_retriably_when_nothing_answers() -> None:
    with pytest.raises(KvError) as err:
        async with EtcdKv.connect([f"http://127.0.0.1:{free_port()}"], timeout=2.0):
            pass
    assert err.value.retriable
    assert err.value.__cause__ is not None


async def test_connect_rejects_bad_endpoints() -> None:
    for bad in ["https://127.0.0.1:2379", "http://127.0.0.1:notaport", "http://"]:
        with pytest.raises(KvError) as err:
            async with EtcdKv.connect([bad]):
                pass
        assert not err.value.retriable, bad
    with pytest.raises(ValueError):
        async with EtcdKv.connect([]):
            pass


async def test_calls_fail_retriably_while_etcd_is_down(etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        await kv.put(b"/k", b"v")
        etcd.kill()
        with pytest.raises(KvError) as err:
            await kv.get(b"/k")
        assert err.value.retriable
        assert err.value.__cause__ is not None


async def test_watch_resumes_after_the_revision_it_last_delivered(
    etcd: EtcdProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tributary.coord.etcd")
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        r1 = await kv.put(b"/w/a", b"1")
        async with aclosing(kv.watch_prefix(b"/w/", r1)) as events:
            assert await anext(events) == WatchEvent(PUT, b"/w/a", b"1", r1)
            etcd.kill()
            with run_etcd(etcd.data_dir, port=etcd.port):
                # Written before the watch is back: the resume revision must cover it.
                r2 = await until_ok(lambda: kv.put(b"/w/b", b"2"))
                r3 = await kv.put(b"/w/a", b"3")
                async with asyncio.timeout(WAIT):
                    got = [await anext(events), await anext(events)]
    assert got == [WatchEvent(PUT, b"/w/b", b"2", r2), WatchEvent(PUT, b"/w/a", b"3", r3)]
    assert any("re-watching from revision" in r.getMessage() for r in caplog.records)


async def test_watch_from_a_compacted_revision_fails_for_good(etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        first = await kv.put(b"/w/a", b"1")
        last = await kv.put(b"/w/a", b"2")
        async with aetcd.Client(host=etcd.host, port=etcd.port) as raw:
            await raw.compact(last)
        with pytest.raises(KvError) as err:
            async with aclosing(kv.watch_prefix(b"/w/", first)) as events:
                await anext(events)
        assert not err.value.retriable


async def test_close_winds_down_a_watch_dropped_without_aclosing(etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        rev = await kv.put(b"/w/a", b"1")
        async for _event in kv.watch_prefix(b"/w/", rev):
            break  # the generator is left for the loop to close
    current = asyncio.current_task()
    assert [t for t in asyncio.all_tasks() if t is not current and not t.done()] == []
