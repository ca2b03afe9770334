"""The status page's pure parts: lags from TSOs, counter rates, the owner, the history ring."""

from __future__ import annotations

import pytest

from services.status.collect import _pick
from services.status.history import History, Sample
from services.status.view import Rates, lag_seconds, owner_of, ts_time
from tributary.wire.ts import compose


def test_lag_is_wall_clock_behind_the_tso() -> None:
    ts = compose(1_700_000_000_000, 7)
    assert ts_time(ts) == 1_700_000_000.0
    assert lag_seconds(ts, 1_700_000_012.5) == 12.5
    assert lag_seconds(ts, 1_699_999_999.0) == 0.0  # a clock behind the TSO is no negative lag
    assert lag_seconds(0, 1_700_000_000.0) is None and ts_time(0) is None


def test_rates_need_two_readings_and_skip_restarts() -> None:
    rates = Rates()
    assert rates.update("p", 100, 10.0) is None
    assert rates.update("p", 150, 15.0) == 10.0
    assert rates.update("p", 20, 20.0) is None  # restarted: the counter went down
    assert rates.update("p", 40, 22.0) == 10.0
    assert rates.update("p", None, 23.0) is None  # unreachable: forget it
    assert rates.update("p", 50, 24.0) is None


def test_owner_is_the_first_election_key() -> None:
    assert owner_of({}) is None
    assert owner_of({b"a": (9, "capture-2"), b"b": (4, "capture-1")}) == "capture-1"


def test_history_keeps_the_newest_samples_on_one_axis() -> None:
    history = History(2)
    history.add(Sample(1.0, {"drainer/d": 5.0}))
    history.add(Sample(2.0, {"drainer/d": 6.0, "changefeed/x": 1.0}))
    history.add(Sample(3.0, {"changefeed/x": 2.0}))
    assert len(history) == 2
    assert history.to_dict() == {
        "time": [2.0, 3.0],
        "series": {"changefeed/x": [1.0, 2.0], "drainer/d": [6.0, None]},
    }
    with pytest.raises(ValueError):
        History(0)


def test_metrics_picked_from_an_exposition() -> None:
    text = (
        "# TYPE binlog_pump_storage_storage_size_bytes gauge\n"
        'binlog_pump_storage_storage_size_bytes{type="available"} 2048.0\n'
        'binlog_pump_storage_storage_size_bytes{type="capacity"} 4096.0\n'
        "# TYPE binlog_pump_binlogs_written gauge\n"
        "binlog_pump_binlogs_written 7.0\n"
        "# TYPE other gauge\nother 1.0\n"
    )
    wanted = {
        "binlog_pump_storage_storage_size_bytes": "disk",
        "binlog_pump_binlogs_written": "written",
    }
    assert _pick(text, wanted) == {"disk": 2048.0, "written": 7.0}
