"""The drainer's HTTP ops API (routes beside /metrics, /health and /ready).

tidb-binlog's shapes: ``GET /status`` -> ``{"PumpPos": {pumpID: ts}, "Synced":
bool, "LastTS": checkpoint, "TsMap": ""}``; ``GET /commit_ts`` -> the saved
checkpoint in ``{"message", "code", "data": {"ts"}}``; ``PUT
/state/{nodeID}/{pause|close}`` -> pausing/closing, after which the drainer
stops and records paused/offline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web

from servicekit.ops import add_state_route
from services.drainer.state import DrainerState
from telemetry.http import json_response


def routes(
    node_id: str,
    state: DrainerState,
    positions: Callable[[], Mapping[str, int]],
    synced: Callable[[], bool],
    checkpoint: Callable[[], int],
) -> web.RouteTableDef:
    r = web.RouteTableDef()

    @r.get("/status")
    async def status(_: web.Request) -> web.Response:
        return json_response(
            {"PumpPos": dict(positions()), "Synced": synced(), "LastTS": checkpoint(), "TsMap": ""}
        )

    @r.get("/commit_ts")
    async def commit_ts(_: web.Request) -> web.Response:
        return json_response(
            {
                "message": "get drainer's latest ts success!",
                "code": 200,
                "data": {"ts": checkpoint()},
            }
        )

    add_state_route(r, "drainer", node_id, state.request)
    return r
