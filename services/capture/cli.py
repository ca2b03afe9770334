"""``binlog-cdc``: ``server`` runs a capture; ``cli`` talks to a running cluster over HTTP.

    binlog-cdc server --etcd http://127.0.0.1:2379 --addr 127.0.0.1:8300 \\
        --upstream mysql://root:pw@127.0.0.1:3306/ --cluster-id default
    binlog-cdc cli changefeed create --server 127.0.0.1:8300 -c cf-1 --sink-uri mysql://...
    binlog-cdc cli changefeed list|query|pause|resume|update|remove|statistics -c cf-1
    binlog-cdc cli capture list | drain -p <capture-id>
    binlog-cdc cli processor list | query -c cf-1 -p <capture-id>
    binlog-cdc cli owner resign

``--server`` (and ``--ca``/``--cert``/``--key``) go before the command or, as TiCDC's, after it.

``cli`` prints the server's JSON answer on stdout; errors go to stderr with exit code 1
(2 for bad usage).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
import time
import tomllib
from collections.abc import Sequence
from typing import Any

from services.capture.client import ApiClient, ClientError
from tributary.servicekit.main import run_service
from tributary.settings import SecuritySettings
from tributary.telemetry.tls import ALPN_HTTP, TlsError, client_context
from tributary.version import FLAGS as VERSION_FLAGS
from tributary.version import add_version_flag, version_text
from tributary.wire.ts import physical_ms


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["server"]:
        from services.capture.app import serve
        from services.capture.config import CaptureConfig

        return run_service("binlog-cdc server", CaptureConfig, "CDC", serve, args[1:])
    if args[:1] == ["cli"]:
        return _cli(args[1:])
    if args[:1] and args[0] in VERSION_FLAGS:
        print(version_text())
        return 0
    usage = "usage: binlog-cdc server [flags] | binlog-cdc cli <command>"
    if args[:1] in (["-h"], ["--help"], ["help"]):
        print(usage)
        print("  server   run a capture (binlog-cdc server --help lists its settings)")
        print("  cli      manage changefeeds and captures (binlog-cdc cli --help)")
        return 0
    print(usage, file=sys.stderr)
    return 2


def _connection_flags(p: argparse.ArgumentParser, *, top: bool) -> None:
    """``--server`` and the TLS flags, on ``cli`` and (as TiCDC's, which are global) on every
    command too: given after the command they win; not given there, they leave the value of
    ``cli`` alone."""

    def default(value: str) -> object:
        return value if top else argparse.SUPPRESS

    p.add_argument("--server", default=default("127.0.0.1:8300"), help="a capture's HTTP address")
    p.add_argument(
        "--ca", default=default(""), help="CA certificate (PEM) of a TLS capture: speak HTTPS"
    )
    p.add_argument(
        "--cert", default=default(""), help="client certificate (PEM) the capture requires"
    )
    p.add_argument("--key", default=default(""), help="the client certificate's key (PEM)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="binlog-cdc cli")
    add_version_flag(p)
    _connection_flags(p, top=True)
    common = argparse.ArgumentParser(add_help=False)
    _connection_flags(common, top=False)
    groups = p.add_subparsers(dest="group", required=True)
    feed = groups.add_parser("changefeed").add_subparsers(dest="action", required=True)
    actions = ("create", "list", "query", "pause", "resume", "update", "remove", "statistics")
    for action in actions:
        sub = feed.add_parser(action, parents=[common])
        sub.add_argument("-n", "--namespace", default="default")
        if action != "list":
            sub.add_argument("-c", "--changefeed-id", required=True)
        if action in ("create", "update"):
            sub.add_argument("--sink-uri", required=action == "create")
            sub.add_argument("--target-ts", type=int)
            sub.add_argument("--config", help="changefeed TOML ([filter] rules = [...])")
        if action == "create":
            sub.add_argument("--start-ts", type=int, default=0)
            sub.add_argument("--source-position", default="", help="file:pos to start after")
        if action == "resume":
            sub.add_argument("--overwrite-checkpoint-ts", type=int, default=0)
            sub.add_argument("--overwrite-source-position", default="")
        if action == "statistics":
            sub.add_argument("-I", "--interval", type=float, default=10, help="seconds")
            sub.add_argument(
                "--iterations", type=int, default=0, help="stop after this many (0: never)"
            )
    capture = groups.add_parser("capture").add_subparsers(dest="action", required=True)
    capture.add_parser("list", parents=[common])
    drain = capture.add_parser("drain", parents=[common])
    drain.add_argument("-p", "--capture-id", required=True)
    owner = groups.add_parser("owner").add_subparsers(dest="action", required=True)
    owner.add_parser("resign", parents=[common])
    processor = groups.add_parser("processor").add_subparsers(dest="action", required=True)
    processor.add_parser("list", parents=[common])
    query = processor.add_parser("query", parents=[common])
    query.add_argument("-n", "--namespace", default="default")
    query.add_argument("-c", "--changefeed-id", required=True)
    query.add_argument("-p", "--capture-id", required=True)
    return p


def _config(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    with open(path, "rb") as f:
        return tomllib.load(f)


def _request(a: argparse.Namespace) -> tuple[str, str, object, dict[str, str] | None]:
    """(method, path, body, query) for the parsed command."""
    if a.group == "capture":
        if a.action == "drain":
            return "POST", f"/api/v2/captures/{a.capture_id}/drain", None, None
        return "GET", "/api/v2/captures", None, None
    if a.group == "owner":
        return "POST", "/api/v2/owner/resign", None, None
    if a.group == "processor":
        if a.action == "list":
            return "GET", "/api/v2/processors", None, None
        path = f"/api/v2/processors/{a.changefeed_id}/{a.capture_id}"
        return "GET", path, None, {"namespace": a.namespace}
    ns = {"namespace": a.namespace}
    if a.action == "list":
        return "GET", "/api/v2/changefeeds", None, ns
    path = f"/api/v2/changefeeds/{a.changefeed_id}"
    if a.action == "create":
        body: dict[str, object] = {
            "changefeed_id": a.changefeed_id,
            "namespace": a.namespace,
            "sink_uri": a.sink_uri,
            "start_ts": a.start_ts,
            "target_ts": a.target_ts or 0,
            "source_position": a.source_position,
        }
        if (cfg := _config(a.config)) is not None:
            body["replica_config"] = cfg
        return "POST", "/api/v2/changefeeds", body, ns
    if a.action == "update":
        body = {}
        if a.sink_uri:
            body["sink_uri"] = a.sink_uri
        if a.target_ts is not None:
            body["target_ts"] = a.target_ts
        if (cfg := _config(a.config)) is not None:
            body["replica_config"] = cfg
        return "PUT", path, body, ns
    if a.action == "resume":
        body = {
            "overwrite_checkpoint_ts": a.overwrite_checkpoint_ts,
            "overwrite_source_position": a.overwrite_source_position,
        }
        return "POST", path + "/resume", body, ns
    if a.action in ("pause",):
        return "POST", path + "/pause", None, ns
    if a.action == "remove":
        return "DELETE", path, None, ns
    if a.action == "statistics":
        return "GET", path + "/status", None, ns
    return "GET", path, None, ns  # query


async def _call(
    server: str,
    request: tuple[str, str, object, dict[str, str] | None],
    tls: ssl.SSLContext | None,
) -> Any:
    method, path, body, query = request
    async with ApiClient(server, ssl_context=tls) as client:
        return await client.call(method, path, body, query)


async def _statistics(
    a: argparse.Namespace,
    request: tuple[str, str, object, dict[str, str] | None],
    tls: ssl.SSLContext | None,
) -> None:
    """TiCDC's ``changefeed statistics``: every ``--interval`` seconds, the rows applied
    (``count``) and their rate (``ops``), and how far the sink (checkpoint) and the reading
    (resolved ts) are behind now."""
    method, path, body, query = request
    last: int | None = None
    async with ApiClient(a.server, ssl_context=tls) as client:
        done = 0
        while True:
            status = await client.call(method, path, body, query)
            now_ms = int(time.time() * 1000)
            count = int(status.get("count", 0))
            ops = 0 if last is None else max(0, round((count - last) / a.interval))
            last = count
            figures = {
                "ops": ops,
                "count": count,
                "sink_gap": go_duration(now_ms - physical_ms(int(status["checkpoint_ts"]))),
                "replication_gap": go_duration(now_ms - physical_ms(int(status["resolved_ts"]))),
            }
            print(json.dumps(figures, indent=2), flush=True)
            done += 1
            if a.iterations and done >= a.iterations:
                return
            await asyncio.sleep(a.interval)


def go_duration(ms: int) -> str:
    """Milliseconds as Go prints a ``time.Duration`` of them: ``0s``, ``350ms``, ``1.5s``,
    ``2m3.25s``, ``1h0m5s`` (TiCDC's gaps are printed so)."""
    if ms == 0:
        return "0s"
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    if ms < 1000:
        return f"{sign}{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds = f"{rest / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _tls(a: argparse.Namespace) -> ssl.SSLContext | None:
    """HTTPS with ``--ca`` (and a client certificate with ``--cert``/``--key``); the capture's
    certificate is checked against the CA but not its name, as the services' clients do."""
    security = SecuritySettings(ssl_ca=a.ca, ssl_cert=a.cert, ssl_key=a.key)
    problems = [f"--{key.removeprefix('ssl-')}: {why}" for key, why in security.validate()]
    if problems:
        raise TlsError("; ".join(problems))
    return client_context(security, alpn=ALPN_HTTP, check_hostname=False)


def _cli(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        request = _request(args)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        print(f"binlog-cdc cli: cannot read the config: {e}", file=sys.stderr)
        return 2
    try:
        tls = _tls(args)
    except TlsError as e:
        print(f"binlog-cdc cli: {e}", file=sys.stderr)
        return 2
    try:
        if args.group == "changefeed" and args.action == "statistics":
            asyncio.run(_statistics(args, request, tls))
            return 0
        result = asyncio.run(_call(args.server, request, tls))
    except ClientError as e:
        print(f"binlog-cdc cli: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0
