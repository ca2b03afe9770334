"""The status page in a real headless Chromium against a running cluster: real etcd, two real
pumps, a real drainer. The page shows a pump going offline, and a drainer's lag growing while
it is paused and shrinking once it runs again; a screenshot is kept.

The capture cluster's records are put into etcd with the capture's own models (a capture needs
a MySQL upstream; the keys, not the process, are what the page reads)."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TypeVar

import aiohttp
import pytest

from services.status.app import Started, serve
from services.status.config import StatusConfig
from tests.support.browser import Page, headless_browser
from tests.support.drainer import (
    FAST_PUMP,
    InOrderSink,
    create_merge_table,
    drainer_config,
    running_drainer,
    write_direct,
)
from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tests.support.pump import pump_config, running_pump
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import CaptureInfo, ChangeFeedInfo, ChangeFeedStatus, FeedState
from tributary.config.drainer import DrainerConfig
from tributary.config.pump import PumpConfig
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv
from tributary.settings import ListenSettings
from tributary.tso.client import TsoClient
from tributary.wire.ts import compose

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(300)]

ARTIFACT = Path(__file__).resolve().parents[2] / ".artifacts" / "status-page.png"


C = TypeVar("C", PumpConfig, DrainerConfig)


def on_port_pair(cfg: C) -> C:
    """A fixed free port (a node's HTTP API shares it with gRPC)."""
    return dataclasses.replace(cfg, listen=ListenSettings(f"127.0.0.1:{free_port()}"))


@asynccontextmanager
async def status_page(etcd: str) -> AsyncIterator[str]:
    cfg = dataclasses.replace(
        StatusConfig(),
        listen=ListenSettings("127.0.0.1:0"),
        pd_urls=(etcd,),
        sample_interval=0.5,
        history=120.0,
    )
    stop = asyncio.Event()
    ready: asyncio.Future[Started] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(cfg, stop, ready.set_result), name="test-status-page")
    done, _ = await asyncio.wait({task, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()
    try:
        yield f"http://127.0.0.1:{ready.result().http_port}"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def put_capture_records(kv: Kv) -> None:
    keys = Keys("default")
    for i in (1, 2):
        info = CaptureInfo(f"capture-{i}", f"127.0.0.1:830{i}", start_timestamp=1_700_000_000)
        await kv.put(keys.capture_key(info.id), info.to_json())
    await kv.put(keys.owner_prefix + b"694d7c1a2b3c4d5e", b"capture-1")
    feed = FeedId("default", "orders-to-kafka")
    info = ChangeFeedInfo(
        feed.namespace, feed.id, "kafka://user:secret@127.0.0.1:9092/orders", start_ts=1
    ).with_state(FeedState.NORMAL)
    await kv.put(keys.info_key(feed), info.to_json())
    checkpoint = compose(int((time.time() - 42) * 1000), 0)
    await kv.put(keys.status_key(feed), ChangeFeedStatus(checkpoint).to_json())


async def row(page: Page, table: str, node: str, attr: str) -> str | None:
    value = await page.evaluate(
        f"(() => {{ const r = document.querySelector('#{table} tr[data-node=\"{node}\"]');"
        f" return r ? r.dataset.{attr} : null; }})()"
    )
    return None if value is None else str(value)


async def lag(page: Page, node: str) -> float | None:
    value = await row(page, "drainers", node, "lag")
    return None if value in (None, "", "null") else float(value)  # type: ignore[arg-type]


async def wait_lag(page: Page, node: str, check: str, within: float = 90) -> float:
    async with asyncio.timeout(within):
        while True:
            value = await lag(page, node)
            if value is not None and eval(check, {"lag": value}):
                return value
            await asyncio.sleep(0.5)


async def test_status_page_shows_pump_offline_and_drainer_lag(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    async with AsyncExitStack() as stack:
        kv = await stack.enter_async_context(EtcdKv.connect([etcd.endpoint]))
        pump_a = await stack.enter_async_context(
            running_pump(
                on_port_pair(
                    pump_config(tmp_path / "pa", etcd.endpoint, node_id="pump-a", **FAST_PUMP)
                )
            )
        )
        pump_b = await stack.enter_async_context(
            running_pump(
                on_port_pair(
                    pump_config(tmp_path / "pb", etcd.endpoint, node_id="pump-b", **FAST_PUMP)
                )
            )
        )
        await create_merge_table(kv)
        tso = await stack.enter_async_context(TsoClient(kv, pump_a.started.cluster_id))
        await put_capture_records(kv)
        dcfg = on_port_pair(
            drainer_config(tmp_path / "d", etcd.endpoint, node_id="drainer-1", initial_commit_ts=0)
        )
        url = await stack.enter_async_context(status_page(etcd.endpoint))
        page = await stack.enter_async_context(headless_browser(tmp_path / "chromium-profile"))

        async with running_drainer(dcfg, InOrderSink()) as drainer:
            await write_direct(pump_a, tso, 20)
            await page.navigate(f"{url}/")
            await page.wait_for(
                "document.querySelectorAll('#pumps tr[data-state=online]').length === 2"
            )
            await page.wait_for("!!document.querySelector('#drainers tr[data-node=drainer-1]')")
            assert await row(page, "drainers", "drainer-1", "state") == "online"
            await wait_lag(page, "drainer-1", "lag < 5")
            # the capture cluster, from its keys
            await page.wait_for("!!document.querySelector('tr[data-changefeed=orders-to-kafka]')")
            text = await page.evaluate("document.body.innerText")
            assert "owner: capture-1" in text and "capture-2" in text
            assert "secret" not in text and "******" in text

            # a pump goes offline (binlogctl offline-pump's HTTP request)
            async with (
                aiohttp.ClientSession() as http,
                http.put(f"{pump_b.http}/state/pump-b/close") as r,
            ):
                assert r.status == 200, await r.text()
            await page.wait_for(
                "document.querySelector('#pumps tr[data-node=pump-b]').dataset.state === 'offline'"
            )
            assert await row(page, "pumps", "pump-a", "state") == "online"

            # the drainer pauses: its checkpoint stands still, its lag grows
            await write_direct(pump_a, tso, 10)
            async with (
                aiohttp.ClientSession() as http,
                http.put(f"{drainer.http}/state/drainer-1/pause") as r,
            ):
                assert r.status == 200, await r.text()
            await page.wait_for(
                "document.querySelector('#drainers tr[data-node=drainer-1]').dataset.state"
                " === 'paused'"
            )
            paused_lag = await wait_lag(page, "drainer-1", "lag >= 0")
            grown = await wait_lag(page, "drainer-1", f"lag > {paused_lag} + 3")
            assert grown > paused_lag

        # it runs again, catches up: the lag shrinks
        await write_direct(pump_a, tso, 10)
        async with running_drainer(dcfg, InOrderSink()):
            await page.wait_for(
                "document.querySelector('#drainers tr[data-node=drainer-1]').dataset.state"
                " === 'online'"
            )
            shrunk = await wait_lag(page, "drainer-1", f"lag < {grown} - 2 and lag < 5")
            assert shrunk < grown
            # the chart drew the bump: a polyline with points in the drainer's row
            points = await page.evaluate(
                "document.querySelector('#drainers tr[data-node=drainer-1] polyline')"
                ".getAttribute('points').split(' ').length"
            )
            assert points > 3
            shot = await page.screenshot(tmp_path / "status-page.png")
        ARTIFACT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, ARTIFACT)
        print(f"\nstatus page screenshot: {shot} (copied to {ARTIFACT})", file=sys.stderr)
