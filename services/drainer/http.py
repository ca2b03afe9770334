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

from services.drainer.state import Action, DrainerState, StateError
from telemetry.http import ApiError, json_response


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

    @r.put("/state/{node_id}/{action}")
    async def apply_state(request: web.Request) -> web.Response:
        target, name = request.match_info["node_id"], request.match_info["action"]
        if target != node_id:
            raise ApiError(404, f"this is drainer {node_id}, not {target}")
        try:
            action = Action(name)
        except ValueError:
            raise ApiError(400, f"unknown action {name!r}; use pause or close") from None
        try:
            new_state = state.request(action)
        except StateError as e:
            raise ApiError(409, str(e)) from e
        return json_response(
            {
                "message": f"apply action {action.value} success!",
                "code": 200,
                "state": new_state.value,
            }
        )

    return r
