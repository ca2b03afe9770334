"""The metric names real pumps, drainers and captures export: each started on loopback
against a real etcd, its ``/metrics`` scraped, every family and sample name collected
(histograms give ``_bucket``, ``_sum`` and ``_count``; labelled families with no child yet are
still declared by their ``# TYPE`` line)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from services.capture.app import Started as CaptureStarted
from services.capture.app import serve as serve_capture
from services.capture.config import CaptureConfig
from tests.support.capture_fakes import FakeDownstream, FakeLog
from tests.support.drainer import InOrderSink, drainer_config, running_drainer
from tests.support.pump import pump_config, running_pump
from tributary.settings import ListenSettings


def names(exposition: str) -> set[str]:
    out: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        out.add(family.name)
        out.update(s.name for s in family.samples)
        if family.type == "counter":
            out.add(family.name + "_total")
        if family.type == "histogram":
            out.update(family.name + s for s in ("_bucket", "_sum", "_count"))
    return out


async def scrape(http: aiohttp.ClientSession, base: str) -> str:
    async with http.get(f"{base}/metrics") as r:
        r.raise_for_status()
        return await r.text()


async def exported_metric_names(etcd: str, tmp: Path) -> dict[str, set[str]]:
    """``{"pump": names, "drainer": names, "capture": names}`` from real processes."""
    out: dict[str, set[str]] = {}
    async with aiohttp.ClientSession() as http:
        async with running_pump(pump_config(tmp / "pump", etcd)) as pump:
            out["pump"] = names(await scrape(http, pump.http))
            cfg = drainer_config(tmp / "drainer", etcd, initial_commit_ts=0)
            async with running_drainer(cfg, InOrderSink()) as drainer:
                out["drainer"] = names(await scrape(http, drainer.http))
        capture = CaptureConfig(
            listen=ListenSettings("127.0.0.1:0"), etcd=(etcd,), upstream="mysql://fake/"
        )
        stop = asyncio.Event()
        up: asyncio.Future[CaptureStarted] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve_capture(
                capture, stop, up.set_result, source=FakeLog(), sink_opener=FakeDownstream().open
            ),
            name="metrics-capture",
        )
        try:
            started = await asyncio.wait_for(up, 30)
            out["capture"] = names(await scrape(http, f"http://127.0.0.1:{started.http_port}"))
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
    return out
