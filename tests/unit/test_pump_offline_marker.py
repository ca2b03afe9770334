"""The offline marker: a pump taken offline refuses to start again unless told to rejoin."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.pump.app import serve
from tributary.config.pump import PumpConfig
from tributary.registry.offline import MARKER, OfflineMarked, check_marker, write_marker
from tributary.settings import ListenSettings

T0 = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)


def test_without_a_marker_a_pump_starts(tmp_path: Path) -> None:
    check_marker(tmp_path, rejoin=False)


def test_a_marked_data_dir_is_refused_with_how_to_rejoin(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_marker(tmp_path, "c-pump-2", T0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER]  # no temporary file left
    with caplog.at_level(logging.ERROR), pytest.raises(OfflineMarked) as e:
        check_marker(tmp_path, rejoin=False)
    assert "pump c-pump-2 was taken offline at 2024-01-01T12:00:00+00:00" in str(e.value)
    assert "--rejoin" in str(e.value) and "empty data directory" in str(e.value)
    assert "--rejoin" in caplog.text  # the log line says how to rejoin
    assert (tmp_path / MARKER).exists()  # refusing changes nothing


def test_rejoin_removes_the_marker(tmp_path: Path) -> None:
    write_marker(tmp_path, "c-pump-2", T0)
    check_marker(tmp_path, rejoin=True)
    assert not (tmp_path / MARKER).exists()
    check_marker(tmp_path, rejoin=False)  # and the next start is a plain one


async def test_the_pump_start_up_refuses_before_it_touches_etcd(tmp_path: Path) -> None:
    write_marker(tmp_path, "p", T0)
    cfg = dataclasses.replace(
        PumpConfig(),
        listen=ListenSettings("127.0.0.1:0"),
        data_dir=str(tmp_path),
        pd_urls=("http://127.0.0.1:1",),
    )
    with pytest.raises(OfflineMarked):
        await asyncio.wait_for(serve(cfg, asyncio.Event()), 30)
