"""Packed times and durations (types/time.go ToPackedUint/FromPackedUint, core_time.go)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.tidbcodec.errors import DecodeError, EncodeError
from tributary.tidbcodec.temporal import (
    round_datetime,
    round_timedelta,
    timestamp_from_utc,
    timestamp_to_utc,
)
from tributary.tidbcodec.timecodec import CoreTime, nanos_to_timedelta, timedelta_to_nanos


def test_packed_vector_from_the_documented_layout() -> None:
    # tablecodec_test.go TestTimeCodec's "2016-06-23 11:30:45", packed by hand from
    # the 0YYYYYYY.YYYYYYYY.YYdddddh.hhhhmmmm.mmssssss.ffffffff... diagram:
    # ymd = (2016*13+6)<<5 | 23 = 838871, hms = 11<<12 | 30<<6 | 45 = 47021.
    core = CoreTime(2016, 6, 23, 11, 30, 45)
    assert core.to_packed() == 0x1999AEB7AD000000
    assert CoreTime.from_packed(0x1999AEB7AD000000) == core
    assert CoreTime(2011, 11, 11, 0, 0, 0, 123456).to_packed() == 0x198A96000001E240


def test_zero_and_partial_dates_round_trip() -> None:
    assert CoreTime().to_packed() == 0
    assert CoreTime.from_packed(0).is_zero()
    odd = CoreTime(2020, 2, 0)  # MySQL allows a zero day; Python cannot hold it
    assert CoreTime.from_packed(odd.to_packed()) == odd
    assert odd.to_date() is None and odd.to_datetime() is None


def test_out_of_range_fields_rejected() -> None:
    for bad in (
        CoreTime(10000, 1, 1),
        CoreTime(2020, 13, 1),
        CoreTime(2020, 1, 1, 24),
        CoreTime(2020, 1, 1, 0, 0, 0, 1_000_000),
    ):
        with pytest.raises(EncodeError):
            bad.to_packed()
    with pytest.raises(DecodeError):
        CoreTime.from_packed(1 << 64)


def test_json_core_bits_layout() -> None:
    # core_time.go bit fields: year@50 month@46 day@41 hour@36 minute@30 second@24 usec@4.
    core = CoreTime(2020, 1, 2, 3, 4, 5, 6)
    bits = 2020 << 50 | 1 << 46 | 2 << 41 | 3 << 36 | 4 << 30 | 5 << 24 | 6 << 4
    assert core.to_core_bits() == bits
    assert CoreTime.from_core_bits(bits | 0b1110) == core  # fsp/type nibble ignored


DATETIMES = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31))


@settings(deadline=None)
@given(DATETIMES)
def test_datetime_round_trip(value: dt.datetime) -> None:
    core = CoreTime.from_python(value)
    assert CoreTime.from_packed(core.to_packed()).to_datetime() == value


@settings(deadline=None)
@given(DATETIMES, DATETIMES)
def test_packed_order_is_chronological(a: dt.datetime, b: dt.datetime) -> None:
    pa, pb = CoreTime.from_python(a).to_packed(), CoreTime.from_python(b).to_packed()
    assert (pa < pb) == (a < b)


@settings(deadline=None)
@given(
    st.timedeltas(
        min_value=-dt.timedelta(hours=838, minutes=59, seconds=59),
        max_value=dt.timedelta(hours=838, minutes=59, seconds=59),
    )
)
def test_duration_round_trip(value: dt.timedelta) -> None:
    nanos = timedelta_to_nanos(value)
    assert nanos % 1000 == 0
    assert nanos_to_timedelta(nanos) == value


def test_duration_vectors_and_range() -> None:
    # codec_test.go TestDuration's "1 11:11:11" is 35h11m11s in nanoseconds.
    assert timedelta_to_nanos(dt.timedelta(days=1, hours=11, minutes=11, seconds=11)) == (
        (35 * 3600 + 11 * 60 + 11) * 10**9
    )
    assert timedelta_to_nanos(-dt.timedelta(microseconds=1)) == -1000
    with pytest.raises(EncodeError):
        timedelta_to_nanos(dt.timedelta(hours=839))


def test_fsp_rounding_is_half_up_with_carry() -> None:
    assert round_datetime(dt.datetime(2020, 1, 1, 0, 0, 0, 125000), 2).microsecond == 130000
    assert round_datetime(dt.datetime(2020, 12, 31, 23, 59, 59, 999999), 3) == dt.datetime(
        2021, 1, 1
    )
    assert round_datetime(dt.datetime(2020, 1, 1, 0, 0, 0, 499999), 0).second == 0
    assert round_timedelta(-dt.timedelta(microseconds=1500), 3) == -dt.timedelta(milliseconds=2)


def test_timestamp_zone_conversion() -> None:
    plus8 = dt.timezone(dt.timedelta(hours=8))
    stored = timestamp_to_utc(dt.datetime(2024, 1, 1, 8, 0, 0), plus8)
    assert stored == dt.datetime(2024, 1, 1, 0, 0, 0)
    aware = dt.datetime(2024, 1, 1, 8, 0, 0, tzinfo=plus8)
    assert timestamp_to_utc(aware, dt.UTC) == stored
    assert timestamp_from_utc(CoreTime.from_python(stored), plus8) == CoreTime(2024, 1, 1, 8)
    assert timestamp_from_utc(CoreTime(), plus8) == CoreTime()  # zero stays zero
