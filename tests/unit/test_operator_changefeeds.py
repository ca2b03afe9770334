"""Changefeed status entries from the capture cluster's own records (its key layout and models)."""

from __future__ import annotations

from typing import Any

from binlog_operator.changefeeds import checkpoint_time, feed_entries, read_changefeeds
from binlog_operator.configs import CAPTURE_CLUSTER_ID
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus, FeedState, RunningError
from tributary.coord.kv import KeyValue
from tributary.coord.memory import MemoryKv
from tributary.wire.ts import compose

KEYS = Keys(CAPTURE_CLUSTER_ID)
# 2024-04-12T07:05:41.123Z as milliseconds since the epoch
MS = 1712905541123
TS = compose(MS, 7)


def info(feed: FeedId, **kw: Any) -> ChangeFeedInfo:
    return ChangeFeedInfo(feed.namespace, feed.id, "mysql://u:pw@db:3306/", 1, **kw)


async def test_every_changefeed_with_state_sink_checkpoint_and_error() -> None:
    kv = MemoryKv()
    ok, failed, bare = FeedId("default", "cf1"), FeedId("default", "cf0"), FeedId("team", "a")
    await kv.put(KEYS.info_key(ok), info(ok).to_json())
    await kv.put(KEYS.status_key(ok), ChangeFeedStatus(TS).to_json())
    err = RunningError("downstream refused", code="CDC:ErrMySQLTxnError")
    await kv.put(KEYS.info_key(failed), info(failed, state=FeedState.FAILED, error=err).to_json())
    await kv.put(KEYS.info_key(bare), info(bare, state=FeedState.STOPPED).to_json())
    # not changefeeds of this cluster: another cdc cluster id, a status without info
    await kv.put(Keys("other").info_key(ok), info(ok).to_json())
    await kv.put(KEYS.status_key(FeedId("default", "gone")), ChangeFeedStatus(TS).to_json())

    entries = await read_changefeeds(kv, CAPTURE_CLUSTER_ID)

    assert entries == [
        {
            "id": "cf0",
            "namespace": "default",
            "state": "failed",
            "sinkURI": "mysql://u:******@db:3306/",
            "error": "CDC:ErrMySQLTxnError: downstream refused",
        },
        {
            "id": "cf1",
            "namespace": "default",
            "state": "normal",
            "sinkURI": "mysql://u:******@db:3306/",
            "checkpointTS": TS,
            "checkpointTime": "2024-04-12T07:05:41.123Z",
        },
        {
            "id": "a",
            "namespace": "team",
            "state": "stopped",
            "sinkURI": "mysql://u:******@db:3306/",
        },
    ]


def test_an_unreadable_record_is_reported_and_does_not_hide_the_others() -> None:
    good, bad = FeedId("default", "good"), FeedId("default", "bad")
    records = [
        KeyValue(KEYS.info_key(bad), b"{not json", 1, 1, 1),
        KeyValue(KEYS.info_key(good), info(good).to_json(), 2, 2, 1),
        KeyValue(KEYS.status_key(good), b"[]", 3, 3, 1),
    ]
    bad_entry, good_entry = feed_entries(KEYS, records)
    assert bad_entry["id"] == "bad" and bad_entry["state"] == "unknown"
    assert bad_entry["error"].startswith("unreadable changefeed info")
    assert good_entry["state"] == "normal" and "checkpointTS" not in good_entry
    assert good_entry["error"].startswith("unreadable changefeed status")


def test_checkpoint_time_is_the_physical_part_in_rfc3339() -> None:
    assert checkpoint_time(TS) == "2024-04-12T07:05:41.123Z"
    assert checkpoint_time(compose(0, 5)) == "1970-01-01T00:00:00.000Z"
