"""A real headless Chromium for page tests, driven over the Chrome DevTools Protocol.

Debian's ``chromium`` comes from ``make deps`` (scripts/deps); this module only looks it up.
``headless_browser`` starts it with a fresh profile on a free debugging port, opens one page
target and yields a ``Page`` that evaluates JavaScript and takes screenshots over the target's
websocket (aiohttp); the browser process is killed on exit.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.components import ComponentMissing, component
from tests.support.net import free_port

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


class BrowserUnavailable(RuntimeError):
    """Chromium is missing or could not start; the message says why."""


def chromium_binary() -> str:
    """Debian's chromium, which ``make deps`` installs; missing, the test fails at once."""
    try:
        return str(component("chromium"))
    except ComponentMissing as e:
        raise BrowserUnavailable(str(e)) from None


class Page:
    """One page target: ``evaluate`` JavaScript, ``navigate``, ``screenshot``."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self._ws.send_json({"id": call_id, "method": method, "params": params})
        async with asyncio.timeout(30):
            while True:
                msg = await self._ws.receive_json()
                if msg.get("id") != call_id:
                    continue  # an event
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg["result"]
                return result

    async def navigate(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, within: float = 60.0) -> Any:
        """Poll ``expression`` until it is truthy; returns its value."""
        deadline = time.monotonic() + within
        last: Any = None
        while time.monotonic() < deadline:
            last = await self.evaluate(expression)
            if last:
                return last
            await asyncio.sleep(0.5)
        shown = await self.evaluate("document.body ? document.body.innerText : ''")
        raise TimeoutError(f"{expression!r} still {last!r} after {within} s; page:\n{shown}")

    async def screenshot(self, path: Path) -> Path:
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        await asyncio.to_thread(path.write_bytes, base64.b64decode(shot["data"]))
        return path


@asynccontextmanager
async def headless_browser(profile: Path) -> AsyncIterator[Page]:
    """A headless Chromium with a fresh profile in ``profile``; yields its first page."""
    port = free_port()
    log_path = profile.parent / "chromium.log"
    proc = await asyncio.to_thread(_launch, profile, port, log_path)
    try:
        async with aiohttp.ClientSession() as http:
            target = await _page_target(http, port, proc, log_path)
            async with http.ws_connect(target, max_msg_size=64 << 20) as ws:
                page = Page(ws)
                await page.call("Page.enable")
                yield page
    finally:
        proc.kill()
        proc.wait()


def _launch(profile: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [
                chromium_binary(),
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={port}",
                "--remote-debugging-address=127.0.0.1",
                "about:blank",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:]


async def _page_target(
    http: aiohttp.ClientSession, port: int, proc: subprocess.Popen[bytes], log_path: Path
) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrowserUnavailable(f"chromium exited with {proc.returncode}: {_tail(log_path)}")
        try:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                targets = json.loads(await r.text())
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                url: str = pages[0]["webSocketDebuggerUrl"]
                return url
        except (aiohttp.ClientError, OSError, ValueError):
            pass
        await asyncio.sleep(0.2)
    raise BrowserUnavailable("chromium's DevTools endpoint did not come up within 60 s")
