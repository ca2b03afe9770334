"""Operator actions on a running node: ``PUT /state/{nodeID}/{pause|close}``.

Pumps and drainers answer this route the same way (tidb-binlog's API): 404
for another node's id, 400 for an unknown action, 409 when the node is not
online, else 200 with the state the node moved to.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from aiohttp import web

from tributary.errors import TributaryError
from tributary.registry.status import NodeState
from tributary.telemetry.http import ApiError, json_response


class Action(enum.StrEnum):
    """What an operator may ask a running node to do."""

    PAUSE = "pause"
    CLOSE = "close"


class ActionRefused(TributaryError):
    """The action is not allowed in the node's current state."""


def add_state_route(
    routes: web.RouteTableDef,
    kind: str,
    node_id: str,
    request: Callable[[Action], NodeState],
) -> None:
    """Register ``PUT /state/{node_id}/{action}``; ``request`` applies the action
    or raises ActionRefused. ``kind`` ("pump", "drainer") names the node in errors."""

    @routes.put("/state/{node_id}/{action}")
    async def apply_state(req: web.Request) -> web.Response:
        target, name = req.match_info["node_id"], req.match_info["action"]
        if target != node_id:
            raise ApiError(404, f"this is {kind} {node_id}, not {target}")
        try:
            action = Action(name)
        except ValueError:
            raise ApiError(400, f"unknown action {name!r}; use pause or close") from None
        try:
            new_state = request(action)
        except ActionRefused as e:
            raise ApiError(409, str(e)) from e
        return json_response(
            {
                "message": f"{kind} {node_id} is {new_state.value}",
                "code": 200,
                "state": new_state.value,
            }
        )
