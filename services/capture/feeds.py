"""Changefeed operations (create, update, pause, resume, remove, read), acted through etcd.

Any capture serves them: each is one guarded read-modify-write txn (``worker.update``) on the
changefeed's keys, so two operators racing never lose an update, and the owner picks the
result up on its next tick (placing, stopping or moving processors). Nothing here needs the
owner to be reachable; only placement waits for one.

State rules (TiCDC's): pause from normal, warning or failed; resume from stopped, failed or
warning (a new epoch restarts the processor; ``overwrite_checkpoint`` also moves the status
checkpoint and source position); update only while stopped or failed; remove deletes the info,
the status and every task position in one txn.

Create also writes the changefeed's spans (``tributary.cdc.spans``), unassigned, each at the
start checkpoint: a changefeed into a sink that many captures may write at once
(``SPREAD_SCHEMES``) gets one span per upstream table its filter passes, plus ``#ddl``;
any other gets the single span ``*``. The owner assigns them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from services.capture.errors import BadRequest, FeedExists, FeedNotFound
from services.capture.eventfilter import EventFilter
from services.capture.rules import table_filter
from services.capture.source import ChangeSource
from services.capture.state import ClusterState, Mirror
from services.capture.worker import Patch, PatchGroup, PatchResult, update
from tributary.cdc.keys import FeedId, KeyKind, Keys, valid_id
from tributary.cdc.model import (
    AdminJob,
    ChangeFeedInfo,
    ChangeFeedStatus,
    FeedState,
    ReplicaConfig,
    now_text,
)
from tributary.cdc.spans import DDL_SPAN, WHOLE_SPAN, TableAssign, TableProgress, table_span
from tributary.coord.kv import Kv
from tributary.sinks.port import SinkError
from tributary.sinks.schemes import OPENERS, BadSinkUrl, check_options, scheme_of
from tributary.sinks.syncpoints import SYNC_POINT_SCHEMES
from tributary.sinks.urls import redact
from tributary.wire.ts import from_seconds

ChangeFeedInfoFn = Callable[[ChangeFeedInfo], ChangeFeedInfo]

# Sinks whose changefeeds are spread over the captures, a table each: many writers may share
# them. Kafka's watermarks and the file, SQLite, pump and print sinks need one writer.
SPREAD_SCHEMES = frozenset({"mysql"})
_SPAN_KINDS = (KeyKind.TASK, KeyKind.TABLE, KeyKind.PROGRESS)


def new_epoch(previous: int = 0) -> int:
    return max(previous + 1, from_seconds(time.time()))


@dataclass(frozen=True, slots=True)
class CreateRequest:
    changefeed_id: str
    sink_uri: str
    namespace: str = "default"
    start_ts: int = 0  # 0: now
    target_ts: int = 0  # 0: forever
    source_position: str = ""  # "": the upstream's current position
    config: ReplicaConfig = field(default_factory=ReplicaConfig)


@dataclass(frozen=True, slots=True)
class UpdateRequest:
    sink_uri: str | None = None
    target_ts: int | None = None
    config: ReplicaConfig | None = None


def check_sink(uri: str) -> None:
    try:
        scheme = scheme_of(uri)
    except BadSinkUrl as e:
        raise BadRequest(str(e)) from e
    if scheme not in OPENERS:
        known = ", ".join(f"{s}://" for s in sorted(OPENERS))
        raise BadRequest(f"unknown sink {redact(uri)!r}: the known schemes are {known}")
    try:
        check_options(uri)  # a storage sink's parameters
    except SinkError as e:
        raise BadRequest(str(e)) from e


def check_config(config: ReplicaConfig) -> None:
    """BadRequest naming what the processors could not apply (rules, event filters)."""
    table_filter(config.filter_rules)
    EventFilter(config.event_filters)


def check_sync_points(uri: str, config: ReplicaConfig) -> None:
    """Sync points only into a SQL downstream, as TiCDC ("The SyncPoint must be disabled when
    the downstream is not tidb or mysql")."""
    if config.enable_sync_point and scheme_of(uri) not in SYNC_POINT_SCHEMES:
        raise BadRequest(
            f"config.enable-sync-point: sync points are written into a MySQL, MariaDB or TiDB "
            f"downstream (mysql:// or tidb://), not into {redact(uri)!r}"
        )


class Feeds:
    """Changefeed operations of one cluster."""

    def __init__(self, kv: Kv, keys: Keys, source: ChangeSource, upstream_id: int = 0) -> None:
        self.kv = kv
        self.keys = keys
        self._source = source
        self._upstream_id = upstream_id

    async def state(self) -> ClusterState:
        mirror = Mirror()
        mirror.load(await self.kv.get_prefix(self.keys.prefix), 0)
        return ClusterState.parse(self.keys, mirror)

    async def get(self, feed: FeedId) -> tuple[ChangeFeedInfo, ChangeFeedStatus | None]:
        view = (await self.state()).feeds.get(feed)
        if view is None or view.info is None:
            raise FeedNotFound(f"changefeed {feed} does not exist")
        return view.info, view.status

    async def create(self, req: CreateRequest) -> ChangeFeedInfo:
        for what, name in (("changefeed id", req.changefeed_id), ("namespace", req.namespace)):
            if not valid_id(name):
                raise BadRequest(f"bad {what} {name!r}: use letters, digits and inner dashes")
        check_sink(req.sink_uri)
        check_config(req.config)
        check_sync_points(req.sink_uri, req.config)
        if req.start_ts < 0 or req.target_ts < 0:
            raise BadRequest("start_ts and target_ts must not be negative")
        start_ts = req.start_ts or from_seconds(time.time())
        if req.target_ts and req.target_ts <= start_ts:
            raise BadRequest(f"target_ts {req.target_ts} must be after start_ts {start_ts}")
        position = req.source_position or await self._source.current_position()
        feed = FeedId(req.namespace, req.changefeed_id)
        info = ChangeFeedInfo(
            namespace=req.namespace,
            changefeed_id=req.changefeed_id,
            sink_uri=req.sink_uri,
            start_ts=start_ts,
            target_ts=req.target_ts,
            create_time=now_text(),
            config=req.config,
            upstream_id=self._upstream_id,
            epoch=new_epoch(),
        )
        status = ChangeFeedStatus(start_ts, position)
        spans = [WHOLE_SPAN]
        if scheme_of(req.sink_uri) in SPREAD_SCHEMES:
            tables = await self._source.tables(table_filter(req.config.filter_rules))
            spans = [DDL_SPAN, *(table_span(d, t) for d, t in tables)]
        start = TableProgress(start_ts, position).to_json()
        span_patches = [
            p
            for span in spans
            for p in (
                Patch(self.keys.table_key(feed, span), _value(TableAssign("").to_json())),
                Patch(self.keys.progress_key(feed, span), _value(start)),
            )
        ]

        def put_info(old: bytes | None) -> PatchResult:
            if old is not None:
                raise FeedExists(f"changefeed {feed} already exists")
            return info.to_json()

        def put_status(_: bytes | None) -> PatchResult:
            return status.to_json()

        info_patch = Patch(self.keys.info_key(feed), put_info)
        status_patch = Patch(self.keys.status_key(feed), put_status)
        await update(self.kv, PatchGroup((info_patch, status_patch, *span_patches)))
        return info

    async def pause(self, feed: FeedId) -> None:
        def fn(info: ChangeFeedInfo) -> ChangeFeedInfo:
            if info.state is FeedState.STOPPED:
                return info
            if info.state not in (FeedState.NORMAL, FeedState.WARNING, FeedState.FAILED):
                raise BadRequest(f"changefeed {feed} is {info.state.value}: it cannot be paused")
            return info.with_state(FeedState.STOPPED, admin_job_type=AdminJob.STOP)

        await self._patch_info(feed, fn)

    async def resume(
        self, feed: FeedId, overwrite_ts: int = 0, overwrite_position: str = ""
    ) -> None:
        if bool(overwrite_ts) != bool(overwrite_position):
            raise BadRequest("overwrite_checkpoint_ts needs overwrite_source_position too")

        def fn(info: ChangeFeedInfo) -> ChangeFeedInfo:
            if info.state is FeedState.NORMAL and not overwrite_ts:
                return info
            if info.state not in (FeedState.STOPPED, FeedState.FAILED, FeedState.WARNING):
                raise BadRequest(f"changefeed {feed} is {info.state.value}: it cannot be resumed")
            return info.with_state(
                FeedState.NORMAL,
                admin_job_type=AdminJob.RESUME,
                error=None,
                warning=None,
                epoch=new_epoch(info.epoch),
            )

        extra: tuple[Patch, ...] = ()
        if overwrite_ts:
            status = ChangeFeedStatus(overwrite_ts, overwrite_position)
            extra = (Patch(self.keys.status_key(feed), lambda _: status.to_json()),)
            view = (await self.state()).feeds.get(feed)
            for span in view.progress if view is not None else ():
                extra += (Patch(self.keys.progress_key(feed, span), _rewind(status)),)
        await self._patch_info(feed, fn, extra)

    async def update(self, feed: FeedId, req: UpdateRequest) -> ChangeFeedInfo:
        if req.sink_uri is not None:
            check_sink(req.sink_uri)
        if req.config is not None:
            check_config(req.config)

        def fn(info: ChangeFeedInfo) -> ChangeFeedInfo:
            if info.state not in (FeedState.STOPPED, FeedState.FAILED):
                raise BadRequest(
                    f"changefeed {feed} is {info.state.value}: pause it before updating"
                )
            target = info.target_ts if req.target_ts is None else req.target_ts
            if target and target <= info.start_ts:
                raise BadRequest(f"target_ts {target} must be after start_ts {info.start_ts}")
            new = replace(
                info,
                sink_uri=req.sink_uri if req.sink_uri is not None else info.sink_uri,
                target_ts=target,
                config=req.config if req.config is not None else info.config,
            )
            check_sync_points(new.sink_uri, new.config)
            return new

        return await self._patch_info(feed, fn)

    async def remove(self, feed: FeedId) -> None:
        state = await self.state()
        view = state.feeds.get(feed)
        if view is None or view.info is None:
            raise FeedNotFound(f"changefeed {feed} does not exist")

        def gone(old: bytes | None) -> PatchResult:
            if old is None:
                raise FeedNotFound(f"changefeed {feed} does not exist")
            return None

        patches = [Patch(self.keys.info_key(feed), gone)]
        patches.append(Patch(self.keys.status_key(feed), lambda _: None))
        for kv in await self.kv.get_prefix(self.keys.prefix):
            parsed = self.keys.parse(kv.key)
            if parsed is not None and parsed.kind in _SPAN_KINDS and parsed.feed == feed:
                patches.append(Patch(kv.key, lambda _: None))
        await update(self.kv, PatchGroup(tuple(patches)))

    async def _patch_info(
        self, feed: FeedId, fn: ChangeFeedInfoFn, extra: tuple[Patch, ...] = ()
    ) -> ChangeFeedInfo:
        result: list[ChangeFeedInfo] = []

        def patch(old: bytes | None) -> PatchResult:
            if old is None:
                raise FeedNotFound(f"changefeed {feed} does not exist")
            new = fn(ChangeFeedInfo.from_json(old))
            result.append(new)
            return new.to_json()

        await update(self.kv, PatchGroup((Patch(self.keys.info_key(feed), patch), *extra)))
        return result[-1]


def _value(value: bytes) -> Callable[[bytes | None], PatchResult]:
    return lambda _: value


def _rewind(status: ChangeFeedStatus) -> Callable[[bytes | None], PatchResult]:
    """A span's progress moved to an overwritten checkpoint (its capture kept)."""

    def fn(old: bytes | None) -> PatchResult:
        capture = TableProgress.from_json(old).capture if old is not None else ""
        return TableProgress(status.checkpoint_ts, status.source_position, capture).to_json()

    return fn
