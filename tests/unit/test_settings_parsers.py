"""Value parsers: what TOML, environment and flags may say, and the render/parse round trip."""

from __future__ import annotations

import pytest

from tributary.settings import parsers as p


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        (3, 3.0),
        (1.5, 1.5),
        ("30", 30.0),
        ("0.25", 0.25),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("8h", 28800.0),
        ("1h30m", 5400.0),
        ("1h0m30s", 3630.0),
        ("250ms", 0.25),
        ("1.5s", 1.5),
        ("2d", 172800.0),
        ("100us", 0.0001),
    ],
)
def test_duration_accepts_numbers_and_go_durations(raw: object, seconds: float) -> None:
    assert p.parse_duration(raw) == pytest.approx(seconds)


@pytest.mark.parametrize("raw", ["", "h", "1x", "1h 30m", "30m1", "-5", -1, True, "nan", [1]])
def test_duration_rejects_garbage(raw: object) -> None:
    with pytest.raises(ValueError, match=r"duration|negative"):
        p.parse_duration(raw)


@pytest.mark.parametrize("seconds", [0.0, 1.0, 1.5, 0.25, 0.001, 90.0, 5400.0, 86400 * 7.0, 0.0003])
def test_duration_render_round_trips(seconds: float) -> None:
    assert p.parse_duration(p.render_duration(seconds)) == seconds


def test_duration_render_is_readable() -> None:
    assert p.render_duration(5400) == "1h30m"
    assert p.render_duration(90) == "1m30s"
    assert p.render_duration(0.25) == "250ms"
    assert p.render_duration(0) == "0s"


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        (1048576, 1048576),
        ("10 gib", 10 * 2**30),
        ("10 GiB", 10 * 2**30),
        ("500MiB", 500 * 2**20),
        ("500MB", 500 * 10**6),
        ("1.5 GiB", 3 * 2**29),
        ("2k", 2000),
        ("2Ki", 2048),
        ("42", 42),
        ("7 B", 7),
    ],
)
def test_byte_size_follows_go_humanize(raw: object, size: int) -> None:
    assert p.parse_byte_size(raw) == size


@pytest.mark.parametrize("raw", ["ten gib", "10 zb", "", -1, 1.5, True, "10 gib extra"])
def test_byte_size_rejects_garbage(raw: object) -> None:
    with pytest.raises(ValueError):
        p.parse_byte_size(raw)


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 10 * 2**30, 3 * 2**29, 5 * 2**50])
def test_byte_size_render_round_trips(size: int) -> None:
    assert p.parse_byte_size(p.render_byte_size(size)) == size
    assert p.render_byte_size(10 * 2**30) == "10 GiB"


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [(7, 7 * 86400.0), ("7", 7 * 86400.0), (0.5, 43200.0), ("8h", 28800.0), ("90s", 90.0)],
)
def test_gc_takes_days_or_a_duration(raw: object, seconds: float) -> None:
    assert p.parse_days_or_duration(raw) == seconds


def test_gc_render_prefers_whole_days() -> None:
    assert p.render_days_or_duration(7 * 86400.0) == 7
    assert p.render_days_or_duration(28800.0) == "8h"
    with pytest.raises(ValueError, match="days or a duration"):
        p.parse_days_or_duration("soon")


@pytest.mark.parametrize(
    ("raw", "value"),
    [(True, True), ("true", True), ("ON", True), ("1", True), ("no", False), (False, False)],
)
def test_bool(raw: object, value: bool) -> None:
    assert p.parse_bool(raw) is value


@pytest.mark.parametrize("raw", [1, 0, "maybe", ""])
def test_bool_is_strict(raw: object) -> None:
    with pytest.raises(ValueError, match="boolean"):
        p.parse_bool(raw)


def test_int_float_str_are_strict_about_toml_types() -> None:
    assert p.parse_int("1_000") == 1000
    assert p.parse_float(2) == 2.0
    for bad_int in (True, 1.0, "1.0", "x"):
        with pytest.raises(ValueError, match="integer"):
            p.parse_int(bad_int)
    with pytest.raises(ValueError, match="string"):
        p.parse_str(8250)


def test_lists_from_arrays_or_commas() -> None:
    assert p.parse_str_list(["a", "b"]) == ("a", "b")
    assert p.parse_str_list(" a, b ,,c") == ("a", "b", "c")
    assert p.parse_str_list("") == ()
    with pytest.raises(ValueError, match="list of strings"):
        p.parse_str_list([1, 2])


def test_url_lists() -> None:
    assert p.parse_url_list("http://a:2379,https://b:2379") == ("http://a:2379", "https://b:2379")
    for bad in ("a:2379", "ftp://a", "http://", "http://a:99999", ""):
        with pytest.raises(ValueError):
            p.parse_url_list(bad)


def test_host_port() -> None:
    assert p.parse_host_port("127.0.0.1:8250") == "127.0.0.1:8250"
    assert p.parse_host_port("[::1]:8250") == "[::1]:8250"
    assert p.parse_host_port(":8250") == ":8250"
    for bad in ("8250", "host:", "host:x", "::1:8250", "h:70000", 8250):
        with pytest.raises(ValueError):
            p.parse_host_port(bad)
