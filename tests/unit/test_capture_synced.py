"""A changefeed's figures from its task positions, and TiCDC's ``/synced`` decision on them."""

from __future__ import annotations

from services.capture.present import NOT_SYNCED, STALLED, SYNCED, Progress, progress, synced
from tributary.cdc.model import ChangeFeedStatus, TaskPosition
from tributary.wire.ts import compose

NOW = 1_700_000_000_000  # ms


def ts(ms_ago: int) -> int:
    return compose(NOW - ms_ago, 0)


def test_progress_takes_the_status_checkpoint_and_the_slowest_reader() -> None:
    status = ChangeFeedStatus(ts(5000))
    tasks = {
        "a": TaskPosition(resolved_ts=ts(1000), count=3, last_synced_ts=ts(9000)),
        "b": TaskPosition(resolved_ts=ts(2000), count=4, last_synced_ts=ts(7000)),
    }
    assert progress(status, tasks) == Progress(ts(5000), ts(2000), ts(7000), 7)
    # A reader that has not reported yet never puts the resolved ts below the checkpoint.
    assert progress(status, {"a": TaskPosition()}).resolved_ts == ts(5000)


def test_synced_when_quiet_for_the_interval_and_the_checkpoint_is_fresh() -> None:
    answer = synced(Progress(ts(1000), ts(500), ts(400_000), 0), NOW, 300, 15)
    assert answer["synced"] is True and answer["info"] == SYNCED
    assert set(answer) == {
        "synced",
        "sink_checkpoint_ts",
        "puller_resolved_ts",
        "last_synced_ts",
        "now_ts",
        "info",
    }


def test_not_synced_while_writes_are_recent() -> None:
    answer = synced(Progress(ts(1000), ts(500), ts(10_000), 0), NOW, 300, 15)
    assert answer["synced"] is False and answer["info"] == NOT_SYNCED


def test_quiet_but_old_checkpoint_says_why() -> None:
    stalled = synced(Progress(ts(60_000), ts(59_000), ts(400_000), 0), NOW, 300, 15)
    assert stalled["synced"] is False and stalled["info"] == STALLED
    behind = synced(Progress(ts(60_000), ts(1000), ts(400_000), 0), NOW, 300, 15)
    assert behind["synced"] is False and behind["info"] == NOT_SYNCED
