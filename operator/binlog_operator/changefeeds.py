"""A BinlogCluster's changefeeds as its status reports them, read from the capture cluster's
records in etcd.

The captures the operator runs use the cdc cluster id ``configs.CAPTURE_CLUSTER_ID`` (passed as
``--cluster-id``), so their changefeeds live under ``/tidb/cdc/<cluster-id>/<namespace>/changefeed/
info|status/<id>`` (``tributary.cdc.keys``), as ``ChangeFeedInfo``/``ChangeFeedStatus`` JSON
(``tributary.cdc.model``). Invariants: one entry per changefeed info record, in (namespace,
id) order; a status record without an info record is ignored (the changefeed is being removed);
a record that cannot be read becomes an entry with state ``unknown`` and the reason in
``error``, so one bad record never hides the others; sink passwords are never shown.

Worked example: info ``{"changefeed-id": "cf1", "state": "normal", "sink-uri":
"mysql://u:pw@db:3306/"}`` and status ``{"checkpoint-ts": 449027910172147719}`` give
``{"id": "cf1", "namespace": "default", "state": "normal", "sinkURI": "mysql://u:******@db:3306/",
"checkpointTS": 449027910172147719, "checkpointTime": "2024-04-12T07:05:41.123Z"}`` (the time is
the TSO's physical part, ``ts >> 18`` milliseconds since the epoch).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from binlog_operator.feedspec import Actual
from tributary.cdc.errors import BadRecord
from tributary.cdc.keys import DEFAULT_NAMESPACE, FeedId, KeyKind, Keys
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus
from tributary.coord.kv import KeyValue, Kv
from tributary.sinks.urls import redact
from tributary.wire.ts import physical_ms

Entry = dict[str, Any]


async def read_changefeeds(kv: Kv, cluster_id: str) -> list[Entry]:
    """The status entries of every changefeed of capture cluster ``cluster_id``."""
    keys = Keys(cluster_id)
    return feed_entries(keys, await kv.get_prefix(keys.prefix))


async def read_actual(kv: Kv, cluster_id: str) -> dict[str, Actual]:
    """{id: changefeed} of capture cluster ``cluster_id``'s default namespace, with the full
    sink URLs (for comparing, never for showing); an unreadable record is left out."""
    keys = Keys(cluster_id)
    found: dict[str, Actual] = {}
    for record in await kv.get_prefix(keys.prefix):
        parsed = keys.parse(record.key)
        if parsed is None or parsed.feed is None or parsed.kind is not KeyKind.INFO:
            continue
        if parsed.feed.namespace != DEFAULT_NAMESPACE:
            continue
        try:
            info = ChangeFeedInfo.from_json(record.value)
        except BadRecord:
            continue
        found[parsed.feed.id] = Actual(parsed.feed.id, info.sink_uri, info.state.value)
    return found


def feed_entries(keys: Keys, records: Iterable[KeyValue]) -> list[Entry]:
    infos: dict[FeedId, bytes] = {}
    statuses: dict[FeedId, bytes] = {}
    for kv in records:
        parsed = keys.parse(kv.key)
        if parsed is None or parsed.feed is None:
            continue
        if parsed.kind is KeyKind.INFO:
            infos[parsed.feed] = kv.value
        elif parsed.kind is KeyKind.STATUS:
            statuses[parsed.feed] = kv.value
    ordered = sorted(infos, key=lambda f: (f.namespace, f.id))
    return [_entry(feed, infos[feed], statuses.get(feed)) for feed in ordered]


def _entry(feed: FeedId, raw_info: bytes, raw_status: bytes | None) -> Entry:
    entry: Entry = {"id": feed.id, "namespace": feed.namespace}
    try:
        info = ChangeFeedInfo.from_json(raw_info)
    except BadRecord as e:
        return {**entry, "state": "unknown", "error": f"unreadable changefeed info: {e}"}
    entry["state"] = info.state.value
    entry["sinkURI"] = redact(info.sink_uri)
    if info.error is not None:
        entry["error"] = f"{info.error.code}: {info.error.message}"
    if raw_status is not None:
        try:
            status = ChangeFeedStatus.from_json(raw_status)
        except BadRecord as e:
            entry.setdefault("error", f"unreadable changefeed status: {e}")
        else:
            entry["checkpointTS"] = status.checkpoint_ts
            if status.checkpoint_ts:
                entry["checkpointTime"] = checkpoint_time(status.checkpoint_ts)
    return entry


def checkpoint_time(ts: int) -> str:
    """RFC 3339 (UTC, milliseconds) of a TSO timestamp's physical part."""
    when = datetime.fromtimestamp(physical_ms(ts) / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
