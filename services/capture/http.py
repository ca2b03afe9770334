"""The capture's HTTP OpenAPI v2 (reference ticdc.md §6), beside /metrics, /health and /ready.

Every capture answers every route. Changefeed writes act through etcd (``feeds.Feeds``: one
guarded txn each), so nothing is forwarded to the owner; the owner reacts on its next tick.
``/changefeeds/{id}/status`` and ``/synced`` and ``/processors/{cf}/{capture}`` read the
processors' figures from their task positions (``present.Progress``); ``/synced`` takes now from
this capture's clock (TiCDC asks PD; here the ts are the upstream's clock, kept in step by NTP).
``POST /api/v2/owner/resign`` deletes the owner's election key (guarded by its revision): the
owner sees it, steps down and campaigns again behind the others.

Errors: 400 bad request or state, 404 unknown changefeed, 409 already exists, 503 when etcd
or the upstream is unavailable; the body carries ``error_msg`` and ``error_code`` as TiCDC's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from services.capture.errors import BadRequest, FeedExists, FeedNotFound
from services.capture.feeds import CreateRequest, Feeds, UpdateRequest
from services.capture.present import (
    Progress,
    feed_detail,
    feed_status,
    feed_summary,
    held_spans,
    processor_detail,
    progress,
    synced,
    view_spans,
)
from tributary.cdc.errors import CaptureError
from tributary.cdc.keys import DEFAULT_NAMESPACE, FeedId
from tributary.cdc.model import VERSION, ChangeFeedInfo, ReplicaConfig
from tributary.coord.kv import Compare, CompareOp, Delete, KvError
from tributary.telemetry.http import ApiError, json_response, read_json


def _error(e: Exception) -> ApiError:
    if isinstance(e, FeedNotFound):
        status, code = 404, "CDC:ErrChangeFeedNotExists"
    elif isinstance(e, FeedExists):
        status, code = 409, "CDC:ErrChangeFeedAlreadyExists"
    elif isinstance(e, BadRequest):
        status, code = 400, "CDC:ErrAPIInvalidParam"
    elif isinstance(e, (KvError, CaptureError)) and e.retriable:
        status, code = 503, "CDC:ErrServiceUnavailable"
    else:
        status, code = 500, "CDC:ErrInternalServerError"
    return ApiError(status, str(e), error_msg=str(e), error_code=code)


_CREATE_KEYS = frozenset(
    {"changefeed_id", "sink_uri", "namespace", "start_ts", "target_ts", "source_position"}
    | {"replica_config", "config"}
)
_UPDATE_KEYS = frozenset({"sink_uri", "target_ts", "replica_config", "config"})
_RESUME_KEYS = frozenset({"overwrite_checkpoint_ts", "overwrite_source_position"})


def _known(body: dict[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    """Refuse, by name, any body key this endpoint would otherwise ignore."""
    unknown = sorted(k for k in body if k not in allowed)
    if unknown:
        raise ApiError(
            400,
            f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}"
            f" (accepted: {', '.join(sorted(allowed))})",
        )
    return body


def _int(body: dict[str, Any], key: str) -> int:
    value = body.get(key) or 0
    if not isinstance(value, int) or value < 0:
        raise BadRequest(f"{key} must be a non-negative integer")
    return value


def _config(body: dict[str, Any]) -> ReplicaConfig | None:
    raw = body.get("replica_config", body.get("config"))
    if raw is None:
        return None
    try:
        return ReplicaConfig.from_dict(raw, strict=True)
    except CaptureError as e:
        raise BadRequest(str(e)) from e


async def _body(req: web.Request) -> dict[str, Any]:
    if not req.can_read_body:
        return {}
    body = await read_json(req)
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def _feed(req: web.Request) -> FeedId:
    return FeedId(req.query.get("namespace", DEFAULT_NAMESPACE), req.match_info["id"])


def routes(
    feeds: Feeds,
    capture_id: str,
    cluster_id: str,
    is_owner: Callable[[], bool],
) -> list[web.RouteDef]:
    r = web.RouteTableDef()

    async def detail(feed: FeedId) -> dict[str, object]:
        info, status = await feeds.get(feed)
        state = await feeds.state()
        view = state.feeds.get(feed)
        tasks = view.tasks if view else {}
        return feed_detail(info, status, sorted(tasks), progress(status, tasks).resolved_ts)

    async def figures(feed: FeedId) -> tuple[ChangeFeedInfo, Progress]:
        view = (await feeds.state()).feeds.get(feed)
        if view is None or view.info is None:
            raise FeedNotFound(f"changefeed {feed} does not exist")
        return view.info, progress(view.status, view.tasks)

    @r.get("/api/v2/health")
    async def health(_: web.Request) -> web.Response:
        state = await feeds.state()
        if state.owner is None or state.owner.capture_id not in state.captures:
            raise ApiError(503, "the cluster has no owner", error_code="CDC:ErrOwnerNotFound")
        return json_response({})

    @r.get("/api/v2/status")
    async def status(_: web.Request) -> web.Response:
        return json_response(
            {
                "version": VERSION,
                "git_hash": "",
                "id": capture_id,
                "cluster_id": cluster_id,
                "pid": os.getpid(),
                "is_owner": is_owner(),
                "liveness": 0,
            }
        )

    @r.get("/api/v2/captures")
    async def captures(_: web.Request) -> web.Response:
        state = await feeds.state()
        owner = state.owner.capture_id if state.owner else ""
        items = [
            {
                "id": c.id,
                "is_owner": c.id == owner,
                "address": c.address,
                "cluster_id": cluster_id,
                "draining": c.id in state.drains,
                "tables": held_spans(state, c.id),
            }
            for c in sorted(state.captures.values(), key=lambda c: c.id)
        ]
        return json_response({"total": len(items), "items": items})

    @r.post("/api/v2/captures/{capture}/drain")
    async def drain(req: web.Request) -> web.Response:
        capture = req.match_info["capture"]
        state = await feeds.state()
        if capture not in state.captures:
            raise ApiError(
                404, f"capture {capture} does not exist", error_code="CDC:ErrCaptureNotExist"
            )
        if len(state.captures) < 2:
            raise ApiError(
                400,
                f"capture {capture} is the only capture: its tables have nowhere to go",
                error_code="CDC:ErrSchedulerRequestFailed",
            )
        if capture not in state.drains:
            await feeds.kv.put(feeds.keys.drain_key(capture), b"{}")
        count = sum(len(spans) for spans in held_spans(state, capture).values())
        return json_response({"current_table_count": count}, status=202)

    @r.post("/api/v2/owner/resign")
    async def resign(_: web.Request) -> web.Response:
        kvs = await feeds.kv.get_prefix(feeds.keys.owner_prefix)
        if not kvs:
            raise ApiError(503, "the cluster has no owner", error_code="CDC:ErrOwnerNotFound")
        key = min(kvs, key=lambda kv: kv.create_revision)
        guard = Compare(key.key, CompareOp.MOD_REVISION_EQUAL, key.mod_revision)
        await feeds.kv.txn([guard], [Delete(key.key)])
        return json_response({})

    @r.get("/api/v2/processors")
    async def processors(_: web.Request) -> web.Response:
        state = await feeds.state()
        items = [
            {
                "changefeed_id": f.id,
                "namespace": f.namespace,
                "capture_id": capture,
                "table_ids": view_spans(view, capture),
            }
            for f, view in sorted(state.feeds.items(), key=lambda kv: str(kv[0]))
            for capture in sorted(view.tasks)
        ]
        return json_response({"total": len(items), "items": items})

    @r.get("/api/v2/processors/{id}/{capture}")
    async def processor(req: web.Request) -> web.Response:
        feed, capture = _feed(req), req.match_info["capture"]
        view = (await feeds.state()).feeds.get(feed)
        task = view.tasks.get(capture) if view is not None else None
        if task is None:
            raise ApiError(
                404,
                f"changefeed {feed} has no processor on capture {capture}",
                error_code="CDC:ErrCaptureNotExist",
            )
        assert view is not None
        detail = processor_detail(feed.id, feed.namespace, capture, task, view_spans(view, capture))
        return json_response(detail)

    @r.post("/api/v2/changefeeds")
    async def create(req: web.Request) -> web.Response:
        body = _known(await _body(req), _CREATE_KEYS)
        cf_id, sink_uri = body.get("changefeed_id"), body.get("sink_uri")
        if not isinstance(cf_id, str) or not isinstance(sink_uri, str) or not sink_uri:
            raise ApiError(400, "changefeed_id and sink_uri are required strings")
        position = body.get("source_position") or ""
        if not isinstance(position, str):
            raise ApiError(400, "source_position must be a string")
        request = CreateRequest(
            changefeed_id=cf_id,
            sink_uri=sink_uri,
            namespace=str(body.get("namespace") or req.query.get("namespace", DEFAULT_NAMESPACE)),
            start_ts=_int(body, "start_ts"),
            target_ts=_int(body, "target_ts"),
            source_position=position,
            config=_config(body) or ReplicaConfig(),
        )
        info = await feeds.create(request)
        return json_response(await detail(FeedId(info.namespace, info.changefeed_id)))

    @r.get("/api/v2/changefeeds")
    async def list_feeds(req: web.Request) -> web.Response:
        state = await feeds.state()
        wanted = req.query.get("state", "")
        namespace = req.query.get("namespace", "")
        items = [
            feed_summary(view.info, view.status)
            for _, view in sorted(state.feeds.items(), key=lambda kv: str(kv[0]))
            if view.info is not None
            and (not wanted or view.info.state.value == wanted)
            and (not namespace or view.feed.namespace == namespace)
        ]
        return json_response({"total": len(items), "items": items})

    @r.get("/api/v2/changefeeds/{id}")
    async def get(req: web.Request) -> web.Response:
        return json_response(await detail(_feed(req)))

    @r.get("/api/v2/changefeeds/{id}/status")
    async def feed_status_(req: web.Request) -> web.Response:
        info, p = await figures(_feed(req))
        return json_response(feed_status(info, p))

    @r.get("/api/v2/changefeeds/{id}/synced")
    async def synced_(req: web.Request) -> web.Response:
        info, p = await figures(_feed(req))
        c = info.config
        now_ms = int(time.time() * 1000)
        return json_response(synced(p, now_ms, c.synced_check_interval, c.checkpoint_interval))

    @r.put("/api/v2/changefeeds/{id}")
    async def put(req: web.Request) -> web.Response:
        body = _known(await _body(req), _UPDATE_KEYS)
        sink_uri = body.get("sink_uri")
        if sink_uri is not None and (not isinstance(sink_uri, str) or not sink_uri):
            raise ApiError(400, "sink_uri must be a non-empty string")
        target = _int(body, "target_ts") if "target_ts" in body else None
        update = UpdateRequest(sink_uri=sink_uri, target_ts=target, config=_config(body))
        await feeds.update(_feed(req), update)
        return json_response(await detail(_feed(req)))

    @r.post("/api/v2/changefeeds/{id}/pause")
    async def pause(req: web.Request) -> web.Response:
        await feeds.pause(_feed(req))
        return json_response({})

    @r.post("/api/v2/changefeeds/{id}/resume")
    async def resume(req: web.Request) -> web.Response:
        body = _known(await _body(req), _RESUME_KEYS)
        ts = _int(body, "overwrite_checkpoint_ts")
        position = body.get("overwrite_source_position") or ""
        if not isinstance(position, str):
            raise ApiError(400, "overwrite_source_position must be a string")
        await feeds.resume(_feed(req), ts, position)
        return json_response({})

    @r.delete("/api/v2/changefeeds/{id}")
    async def delete(req: web.Request) -> web.Response:
        await feeds.remove(_feed(req))
        return json_response({})

    return [web.route(d.method, d.path, _wrap(d.handler)) for d in r if isinstance(d, web.RouteDef)]


def _wrap(handler: Any) -> Any:
    async def wrapped(req: web.Request) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(req)
            return response
        except (CaptureError, KvError) as e:
            raise _error(e) from e

    return wrapped
