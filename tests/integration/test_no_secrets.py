"""No secret leaves the processes that hold one: real processes, their outputs grepped.

A pump, a drainer whose sink URL carries MariaDB's password, and a capture whose upstream URL
carries it too, all three serving their HTTP APIs over mutual TLS; a changefeed whose sink URI
has the password replicates a row. Then everything they expose is searched for the password
and for the base64 body of every TLS private key: their logs (after a clean stop), /status,
/metrics, the capture's OpenAPI answers (changefeed create, update, query and list show the
sink URI as TiCDC does, ``mysql://user:xxxxx@...``), binlogctl's output and every etcd record.

A second changefeed's sink cannot be reached, so a sink error travels through the processor's
task record, the changefeed's warning, the API and the logs.

One record keeps the password on purpose: the changefeed's info key
(``/tidb/cdc/<cluster>/<ns>/changefeed/info/<id>``), as in TiCDC, since the captures that run
the changefeed open its sink from it. Its ``sink-uri`` field alone is excluded below, for that
reason (and checked to hold the password); the rest of the record is searched.

Kubernetes events (the operator's) need an API server and are not covered here.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from tests.support.capture import write_shop
from tests.support.certs import Pki, make_pki
from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tributary.cdc.keys import DEFAULT_CLUSTER, DEFAULT_NAMESPACE
from tributary.coord.etcd import EtcdKv
from tributary.telemetry.tls import ALPN_HTTP, client_context

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
FEED, DOWN = "cf-secret", "cf-down"


def key_bodies(pki: Pki) -> list[str]:
    """The base64 lines of every private key the processes and clients were given."""
    keys = [pki.server.key, *(leaf.key for leaf in pki.clients.values())]
    return [
        line
        for key in keys
        for line in key.read_text().splitlines()
        if line and not line.startswith("-----")
    ]


def security_flags(pki: Pki) -> list[str]:
    """The operator's CN, and the one the processes present to each other (the pump's
    Notify to the drainer, the drainer's pulls): every one of them uses the "pump" leaf."""
    s = pki.server_security(allowed_cn=("ops", pki.server.cn))
    return [
        *("--security-ssl-ca", s.ssl_ca, "--security-ssl-cert", s.ssl_cert),
        *("--security-ssl-key", s.ssl_key),
        *("--security-cert-allowed-cn", ",".join(s.cert_allowed_cn)),
    ]


@contextmanager
def process(service: str, log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", service, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        yield proc
    finally:
        proc.terminate()  # a clean stop, so shutdown's log lines are searched too
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Client:
    def __init__(self, pki: Pki) -> None:
        ctx = client_context(pki.client_security("ops"), alpn=ALPN_HTTP)
        assert ctx is not None
        self.ctx: ssl.SSLContext = ctx
        self.seen: list[tuple[str, str]] = []  # (what, body) for every answer

    async def call(self, method: str, url: str, body: Any = None, ok: bool = True) -> str:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s,
            s.request(method, url, json=body, ssl=self.ctx) as r,
        ):
            text = await r.text()
        self.seen.append((f"{method} {url}", text))
        assert not ok or r.status == 200, f"{method} {url}: {r.status} {text}"
        return text

    async def wait_ready(self, base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        async with asyncio.timeout(60):
            while True:
                if proc.poll() is not None:
                    raise AssertionError(await asyncio.to_thread(log.read_text))
                try:
                    async with (
                        aiohttp.ClientSession() as s,
                        s.get(f"{base}/ready", ssl=self.ctx) as r,
                    ):
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)


def binlogctl(pki: Pki, etcd: EtcdProcess, command: str) -> str:
    leaf = pki.clients["ops"]
    tls = ["--ssl-ca", str(pki.ca.cert), "--ssl-cert", str(leaf.cert), "--ssl-key", str(leaf.key)]
    out = subprocess.run(
        [sys.executable, "-m", "services.binlogctl", command, "--pd-urls", etcd.endpoint, *tls],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode() + out.stderr.decode()


async def etcd_records(etcd: EtcdProcess) -> dict[str, str]:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        return {
            kv_.key.decode(): kv_.value.decode(errors="replace")
            for kv_ in await kv.get_prefix(b"/")  # every key we write starts with /
        }


async def replicated(down: MariaDBServer) -> None:
    async with asyncio.timeout(90):
        while True:
            try:
                rows = await down.query("SELECT id FROM shop.t")
            except Exception:  # the database or table is not there yet
                rows = []
            if rows:
                return
            await asyncio.sleep(0.3)


async def warned(client: Client, url: str) -> None:
    async with asyncio.timeout(90):
        while True:
            if json.loads(await client.call("GET", url))["warning"] is not None:
                return
            await asyncio.sleep(0.3)


def leaks(text: str, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s in text]


async def test_no_secret_in_logs_apis_metrics_or_etcd(
    etcd: EtcdProcess, tmp_path: Path, mariadb_instance: InstanceFactory
) -> None:
    pki = make_pki(tmp_path / "pki", clients=("ops", "intruder"))
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    password = down.password
    assert password == up.password and password in down.dsn()
    secrets = [password, *key_bodies(pki)]
    client = Client(pki)
    tls = security_flags(pki)
    ports = {name: free_port() for name in ("pump", "drainer", "capture")}
    base = {name: f"https://127.0.0.1:{port}" for name, port in ports.items()}
    logs = {name: tmp_path / f"{name}.log" for name in ports}

    outputs: list[tuple[str, str]] = []
    with ExitStack() as stack:
        pump = stack.enter_context(
            process(
                "services.pump",
                logs["pump"],
                *("--addr", f"127.0.0.1:{ports['pump']}", "--data-dir", str(tmp_path / "p")),
                *("--pd-urls", etcd.endpoint, "--storage-stop-write-at-available-space", "1MiB"),
                *tls,
            )
        )
        drainer = stack.enter_context(
            process(
                "services.drainer",
                logs["drainer"],
                *("--addr", f"127.0.0.1:{ports['drainer']}", "--data-dir", str(tmp_path / "d")),
                *("--pd-urls", etcd.endpoint, "--initial-commit-ts", "7"),
                *("--node-id", "drainer-secret", "--syncer-sink-uri", down.dsn()),
                *tls,
            )
        )
        capture = stack.enter_context(
            process(
                "services.capture",
                logs["capture"],
                *("server", "--etcd", etcd.endpoint, "--addr", f"127.0.0.1:{ports['capture']}"),
                *("--upstream", up.dsn() + "?server-id=4243", "--capture-id", "c-secret"),
                *("--capture-session-ttl", "2", "--checkpoint-interval", "0.2"),
                *tls,
            )
        )
        for name, proc in (("pump", pump), ("drainer", drainer), ("capture", capture)):
            await client.wait_ready(base[name], proc, logs[name])

        api = f"{base['capture']}/api/v2"
        masked = f"mysql://{down.user}:xxxxx@{down.host}:{down.port}/"
        created = await client.call(
            "POST", f"{api}/changefeeds", {"changefeed_id": FEED, "sink_uri": down.dsn()}
        )
        assert f'"sink_uri": "{masked}"' in created.replace('":"', '": "'), created
        await up.execute("CREATE DATABASE shop")
        await up.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20))")
        await write_shop(up, ["INSERT INTO t VALUES (1, 'one')"])
        await replicated(down)
        await client.call("POST", f"{api}/changefeeds/{FEED}/pause")
        updated = await client.call(
            "PUT", f"{api}/changefeeds/{FEED}", {"sink_uri": down.dsn() + "?safe-mode=true"}
        )
        assert masked in updated, updated
        await client.call("POST", f"{api}/changefeeds/{FEED}/resume", {})
        queried = await client.call("GET", f"{api}/changefeeds/{FEED}")
        assert f"{masked}?safe-mode=true" in queried, queried
        for path in ("changefeeds", "captures", "processors", "status", "health"):
            await client.call("GET", f"{api}/{path}")
        # a sink that cannot be reached: its error travels through etcd, the API and the logs
        unreachable = f"mysql://{down.user}:{password}@127.0.0.1:{free_port()}/"
        await client.call(
            "POST", f"{api}/changefeeds", {"changefeed_id": DOWN, "sink_uri": unreachable}
        )
        await warned(client, f"{api}/changefeeds/{DOWN}")
        # a refused sink URI: the error names it, masked
        bad = down.dsn().replace("mysql://", "nosuch://")
        refused = await client.call(
            "POST", f"{api}/changefeeds", {"changefeed_id": "cf-bad", "sink_uri": bad}, ok=False
        )
        assert "nosuch://" in refused, refused
        for name in ports:
            for path in ("/status", "/metrics"):
                await client.call("GET", f"{base[name]}{path}", ok=name != "capture")
        outputs += [(f"binlogctl {c}", binlogctl(pki, etcd, c)) for c in ("pumps", "drainers")]
        records = await etcd_records(etcd)

    for feed in (FEED, DOWN):
        # a changefeed's info keeps the real sink URI, as TiCDC's: the captures open the sink
        # from it. Only that one field is left out; the rest of the record is searched.
        key = f"/tidb/cdc/{DEFAULT_CLUSTER}/{DEFAULT_NAMESPACE}/changefeed/info/{feed}"
        info = json.loads(records.pop(key))
        assert password in info.pop("sink-uri")
        outputs.append((f"etcd {key} (but sink-uri)", json.dumps(info)))
    outputs += [(f"etcd {key}", value) for key, value in records.items()]
    outputs += [(f"{name} log", log.read_text()) for name, log in logs.items()]
    refused = [what for what, text in outputs if "CN not allowed" in text]
    assert not refused, f"the processes' own calls were refused: {refused}"
    outputs += client.seen
    assert any("changefeed" in what for what, _ in outputs)
    found = {what: leaks(text, secrets) for what, text in outputs if leaks(text, secrets)}
    assert not found, "secrets found in: " + ", ".join(
        f"{what} ({'password' if password in s else 'key material'})"
        for what, ss in found.items()
        for s in ss[:1]
    )
