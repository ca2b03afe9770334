"""The pump's HTTP ops API (routes beside /metrics, /health and /ready).

``GET /status``, ``PUT /state/{nodeID}/{pause|close}``, ``GET /drainers``,
``GET /debug/binlog/{ts}``, ``POST /debug/gc/trigger`` with tidb-binlog's
response shapes where it has them; ``GET /backlog?after=TS`` (ours): the commits held above
``TS``, the figure ``binlogext.PumpStats/Backlog`` gives a drainer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from services.pump.state import PumpState
from services.pump.storage import Storage, StorageError
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind
from tributary.servicekit.ops import add_state_route
from tributary.telemetry.http import ApiError, json_response
from tributary.wire.binlog import Binlog, BinlogType, PrewriteValue


def _status_doc(raw: bytes) -> Any:
    return json.loads(raw)


def _binlog_doc(payload: bytes) -> dict[str, Any]:
    binlog = Binlog().parse(payload)
    doc: dict[str, Any] = binlog.to_pydict(casing=lambda s, strict=True: s)  # type: ignore[arg-type]
    doc["tp"] = BinlogType(binlog.tp).name
    if binlog.prewrite_value:
        try:
            value = PrewriteValue().parse(binlog.prewrite_value)
        except Exception:  # the codec's error types differ; any failure means "not a PrewriteValue"
            doc["prewrite_value"] = binlog.prewrite_value.hex()
            doc["prewrite_value_error"] = "not a marshalled PrewriteValue"
        else:
            doc["prewrite_value"] = value.to_pydict(casing=lambda s, strict=True: s)  # type: ignore[arg-type]
    for key in ("prewrite_key", "ddl_query"):
        if isinstance(doc.get(key), bytes):
            doc[key] = doc[key].decode("utf-8", "replace")
    result: dict[str, Any] = _jsonable(doc)
    return result


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "name") and hasattr(value, "value"):
        return value.name
    return value


def routes(
    node_id: str,
    state: PumpState,
    registry: NodeRegistry,
    storage: Storage,
    latest_ts: Callable[[], int],
    trigger_gc: Callable[[], Awaitable[int]],
) -> web.RouteTableDef:
    r = web.RouteTableDef()

    @r.get("/status")
    async def status(_: web.Request) -> web.Response:
        pumps = {p.node_id: _status_doc(p.to_json()) for p in await registry.list(NodeKind.PUMP)}
        stuck = list(storage.stats.stuck_prewrites)
        err = (
            f"{len(stuck)} prewrites waiting past max-txn-timeout for their commit "
            f"(oldest start ts {stuck[0]}); the max commit ts waits behind them"
            if stuck
            else ""
        )
        return json_response(
            {
                "status": pumps,
                "CommitTS": latest_ts(),
                "Checkpoint": {},
                "ErrMsg": err,
                "StuckPrewrites": stuck,
            }
        )

    add_state_route(r, "pump", node_id, state.request)

    @r.get("/drainers")
    async def drainers(_: web.Request) -> web.Response:
        return json_response(
            [_status_doc(d.to_json()) for d in await registry.list(NodeKind.DRAINER)]
        )

    @r.get("/debug/binlog/{ts}")
    async def binlog(request: web.Request) -> web.Response:
        raw = request.match_info["ts"]
        try:
            ts = int(raw)
        except ValueError:
            raise ApiError(400, f"ts must be an integer, got {raw!r}") from None
        payload = await storage.get(ts)
        if payload is None:
            raise ApiError(404, f"no binlog stored under ts {ts}")
        return json_response({"ts": ts, "binlog": _binlog_doc(payload)})

    @r.get("/backlog")
    async def backlog(request: web.Request) -> web.Response:
        raw = request.query.get("after", "0")
        try:
            after = int(raw)
        except ValueError:
            raise ApiError(400, f"after must be an integer commit ts, got {raw!r}") from None
        try:
            count, max_commit_ts = await storage.backlog(after)
        except StorageError as e:
            raise ApiError(503, f"cannot count the backlog: {e}") from e
        return json_response({"after": after, "count": count, "max_commit_ts": max_commit_ts})

    @r.post("/debug/gc/trigger")
    async def gc(_: web.Request) -> web.Response:
        gc_ts = await trigger_gc()
        return json_response(
            {"message": "gc triggered", "gc_ts": gc_ts, "done_gc_ts": storage.gc_ts}
        )

    return r
