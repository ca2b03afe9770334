"""What the BinlogCluster says of its pumps' storage: the stop-write samples read from a real
pump's exposition format, the pumps at their floor named in ``PumpStorageFull``, a claim whose
capacity is below its request named in ``VolumeResizePending``, an unread pump counted as
neither."""

from __future__ import annotations

from binlog_operator.pumpstorage import PumpStorage, conditions, entries, samples
from services.pump.metrics import PumpMetrics
from services.pump.storage import StorageStats


def test_samples_from_the_pumps_metrics() -> None:
    m = PumpMetrics()
    stats = StorageStats(stop_write_at_available_space=64 << 20)
    stats.capacity_bytes, stats.available_bytes = 1 << 30, 10 << 20
    m.sync(stats, 0)
    assert samples(m.render().decode()) == (True, 10 << 20, 64 << 20)
    stats.available_bytes = 512 << 20
    m.sync(stats, 0)
    assert samples(m.render().decode()) == (False, 512 << 20, 64 << 20)
    assert samples("") == (None, None, None)


def test_a_pump_at_its_floor_is_named() -> None:
    pumps = [
        PumpStorage("c-pump-0", "data-c-pump-0", "2Gi", "2Gi", 10, 64, True),
        PumpStorage("c-pump-1", "data-c-pump-1", "2Gi", "2Gi", 900, 64, False),
    ]
    full, resize = conditions(pumps)
    assert (full.type, full.status, full.reason) == ("PumpStorageFull", True, "StopWriteFloor")
    assert full.message == (
        "c-pump-0: 10 bytes free <= stop-write-at-available-space 64: prewrites refused"
    )
    assert (resize.status, resize.reason) == (False, "CapacityMeetsRequest")
    assert entries(pumps)[0] == {
        "pod": "c-pump-0",
        "claim": "data-c-pump-0",
        "requested": "2Gi",
        "capacity": "2Gi",
        "availableBytes": 10,
        "stopWriteAtAvailableSpace": 64,
        "stopWrite": True,
    }


def test_a_volume_not_grown_is_named_and_an_unread_pump_is_neither() -> None:
    pumps = [
        PumpStorage("c-pump-0", "data-c-pump-0", "2Gi", "1Gi", 900, 64, False),
        PumpStorage("c-pump-1", "data-c-pump-1", "2Gi", "100Gi", error="refused"),
    ]
    full, resize = conditions(pumps)
    assert (full.status, full.reason) == (False, "AboveFloor")
    assert "metrics not read: c-pump-1" in full.message
    assert (resize.type, resize.status, resize.reason) == (
        "VolumeResizePending",
        True,
        "CapacityBelowRequest",
    )
    assert resize.message.startswith("data-c-pump-0: requested 2Gi, capacity 1Gi")
    assert "data-c-pump-1" not in resize.message
    assert entries(pumps)[1]["error"] == "refused"
