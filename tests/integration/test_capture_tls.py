"""The capture's HTTP API over mutual TLS, and ``binlog-cdc cli`` speaking it.

A real capture (real etcd; the upstream is the in-memory ``FakeLog``, since only the API's
transport is under test) started with ``[security]``: the CLI with ``--ca/--cert/--key`` lists
the captures and creates a changefeed; without a client certificate, with plain HTTP, or with a
CN outside ``cert-allowed-cn`` it is refused; a half-given TLS option is a usage error. Every
state-changing route (POST/PUT/DELETE) refuses a client without a certificate, with another CA's
or with a CN outside the allow list, and the changefeed stays as it was.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from services.capture.app import Started, serve
from services.capture.config import CaptureConfig
from tests.support.capture_fakes import FakeDownstream, FakeLog
from tests.support.certs import Pki, make_pki
from tests.support.etcd import EtcdProcess
from tributary.settings import ListenSettings
from tributary.telemetry.tls import ALPN_HTTP, client_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("ops", "intruder"))


@pytest.fixture
async def capture(etcd: EtcdProcess, pki: Pki) -> AsyncIterator[int]:
    security = pki.server_security(allowed_cn=("ops",))
    cfg = CaptureConfig(
        listen=ListenSettings("127.0.0.1:0"),
        etcd=(etcd.endpoint,),
        upstream="mysql://fake/",
        security=security,
    )
    stop, up = asyncio.Event(), asyncio.get_running_loop().create_future()
    downstream = FakeDownstream()
    task = asyncio.create_task(
        serve(cfg, stop, up.set_result, source=FakeLog(), sink_opener=downstream.open),
        name="capture-under-test",
    )
    started: Started = await asyncio.wait_for(up, 30)
    try:
        yield started.http_port
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "services.capture", "cli", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def tls_flags(pki: Pki, client: str) -> list[str]:
    leaf = pki.clients[client]
    return ["--ca", str(pki.ca.cert), "--cert", str(leaf.cert), "--key", str(leaf.key)]


async def test_the_cli_speaks_mutual_tls_and_others_are_refused(pki: Pki, capture: int) -> None:
    server = f"127.0.0.1:{capture}"
    code, out, err = await cli("--server", server, *tls_flags(pki, "ops"), "capture", "list")
    assert code == 0, err
    (listed,) = json.loads(out)["items"]
    assert listed["is_owner"] in (True, False)
    code, out, err = await cli(
        *("--server", server, *tls_flags(pki, "ops")),
        *("changefeed", "create", "-c", "cf-tls", "--sink-uri", "blackhole://"),
    )
    assert code == 0, err
    code, out, _ = await cli("--server", server, *tls_flags(pki, "ops"), "changefeed", "list")
    assert [f["id"] for f in json.loads(out)["items"]] == ["cf-tls"]
    # a certificate outside cert-allowed-cn: served TLS, refused by the CN guard
    code, _, err = await cli("--server", server, *tls_flags(pki, "intruder"), "capture", "list")
    assert code == 1 and "403" in err
    # no client certificate, or no TLS at all: the handshake fails
    code, _, err = await cli("--server", server, "--ca", str(pki.ca.cert), "capture", "list")
    assert code == 1 and "cannot reach" in err
    code, _, err = await cli("--server", server, "capture", "list")
    assert code == 1 and "cannot reach" in err


async def test_half_given_tls_options_are_a_usage_error(tmp_path: Path) -> None:
    code, _, err = await cli("--cert", str(tmp_path / "c.pem"), "capture", "list")
    assert code == 2 and "--key" in err


async def call(method: str, url: str, ctx: ssl.SSLContext, body: Any = None) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s,
        s.request(method, url, json=body, ssl=ctx) as r,
    ):
        return r.status, await r.text()


def context(pki: Pki, name: str | None) -> ssl.SSLContext:
    ctx = client_context(pki.client_security(name), alpn=ALPN_HTTP)
    assert ctx is not None
    return ctx


async def test_state_changes_need_an_allowed_client_certificate(pki: Pki, capture: int) -> None:
    api = f"https://127.0.0.1:{capture}/api/v2"
    ops = context(pki, "ops")
    status, text = await call(
        "POST", f"{api}/changefeeds", ops, {"changefeed_id": "cf-keep", "sink_uri": "blackhole://"}
    )
    assert status == 200, text
    changes = [
        ("POST", "/changefeeds", {"changefeed_id": "cf-new", "sink_uri": "blackhole://"}),
        ("PUT", "/changefeeds/cf-keep", {"target_ts": 5}),
        ("POST", "/changefeeds/cf-keep/pause", None),
        ("POST", "/changefeeds/cf-keep/resume", {}),
        ("DELETE", "/changefeeds/cf-keep", None),
        ("POST", "/owner/resign", None),
    ]
    for method, path, body in changes:
        for name in (None, "foreign"):  # no certificate, or another CA's: no handshake
            with pytest.raises(aiohttp.ClientError):
                await call(method, f"{api}{path}", context(pki, name), body)
        status, text = await call(method, f"{api}{path}", context(pki, "intruder"), body)
        assert status == 403, (method, path, text)
    status, text = await call("GET", f"{api}/changefeeds/cf-keep", ops)
    assert status == 200, text
    feed = json.loads(text)
    assert feed["state"] == "normal" and feed["target_ts"] == 0
    status, text = await call("GET", f"{api}/changefeeds", ops)
    assert [f["id"] for f in json.loads(text)["items"]] == ["cf-keep"]
    assert (await call("DELETE", f"{api}/changefeeds/cf-keep", ops))[0] == 200
