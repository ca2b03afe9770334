"""The drainer's HTTP ops API (routes beside /metrics, /health and /ready).

tidb-binlog's shapes: ``GET /status`` -> ``{"PumpPos": {pumpID: ts}, "Synced":
bool, "LastTS": checkpoint, "TsMap": ""}``; ``GET /commit_ts`` -> the saved
checkpoint in ``{"message", "code", "data": {"ts"}}``; ``PUT
/state/{nodeID}/{pause|close}`` -> pausing/closing, after which the drainer
stops and records paused/offline.

Catch-up (ours): ``/status`` carries ``"CatchUp"`` when ``[syncer.catchup]`` is on (absent
otherwise, so the body stays tidb-binlog's): state, range, rows, attempts, job pid and its
last progress lines; ``"Sink"``: the configured downstream, password masked (the status page
shows it). ``PUT /catchup`` asks for a catch-up from the next binlog on: 200
accepted, 409 (``{"error": ...}``) when one is under way or catch-up is not enabled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web

from services.drainer.catchup import CatchUp
from services.drainer.state import DrainerState
from tributary.servicekit.ops import add_state_route
from tributary.telemetry.http import error_response, json_response


def routes(
    node_id: str,
    state: DrainerState,
    positions: Callable[[], Mapping[str, int]],
    synced: Callable[[], bool],
    checkpoint: Callable[[], int],
    catchup: CatchUp | None = None,
    sink: str = "",
) -> web.RouteTableDef:
    r = web.RouteTableDef()

    @r.get("/status")
    async def status(_: web.Request) -> web.Response:
        body: dict[str, object] = {
            "PumpPos": dict(positions()),
            "Synced": synced(),
            "LastTS": checkpoint(),
            "TsMap": "",
        }
        if sink:
            body["Sink"] = sink
        if catchup is not None:
            body["CatchUp"] = catchup.status()
        return json_response(body)

    @r.put("/catchup")
    async def catchup_request(_: web.Request) -> web.Response:
        if catchup is None:
            return error_response(409, "catch-up is not enabled ([syncer.catchup] enabled)")
        if not catchup.request():
            return error_response(409, f"a catch-up is under way ({catchup.phase.value})")
        return json_response({"message": "catch-up requested", "state": "requested"})

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
