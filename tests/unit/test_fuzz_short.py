"""The fuzz targets of ``bench.fuzz``, a short run each: no crash, no hang (``make test``)."""

from __future__ import annotations

import pytest

from bench.fuzz.__main__ import run
from bench.fuzz.targets import TARGETS


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target_short_run(target: str) -> None:
    out = run(target, 300, 1, 5.0)
    assert out["crashes"] == 0 and out["hangs"] == 0, out


def test_truncated_events_found_by_fuzzing_are_malformed() -> None:
    from bench.fuzz.targets import _mysql_events
    from tributary.sources.mysql.errors import MalformedEvent

    for hexed in ("64000000a20100000020000000780000000000070000",
                  "64000000020100000038000000c8000000000001000000"):  # fmt: skip
        with pytest.raises(MalformedEvent):
            _mysql_events(bytes.fromhex(hexed))


def test_a_sink_url_urllib_cannot_read_is_refused_by_name() -> None:
    """Found by fuzzing toml_arbiter: ``host = "127.0.0[1"`` made ``urlsplit`` raise ValueError
    out of the config check; the same URL as a changefeed's sink_uri was an HTTP 500."""
    from bench.fuzz.http_targets import capture_http
    from services.arbiter.config import ArbiterConfig
    from services.capture.errors import BadRequest
    from services.capture.feeds import check_sink
    from services.reparo.config import ReparoConfig
    from tributary.settings import SettingsError, from_toml

    arbiter = b'[up]\ntopic = "t"\nkafka-addrs = "k:9092"\n[down]\nhost = "127.0.0[1"\n'
    with pytest.raises(SettingsError, match=r"down\.host .*not a valid URL"):
        from_toml(ArbiterConfig, arbiter)
    with pytest.raises(SettingsError, match=r"dest-url .*not a valid URL"):
        from_toml(ReparoConfig, b'data-dir = "d"\ndest-url = "mysql://u:pw@[::1/"\n')
    with pytest.raises(BadRequest, match="not a valid URL"):
        check_sink("kafka://[broker:9092/t")
    capture_http(b'\x01/api/v2/changefeeds\n{"changefeed_id": "x", "sink_uri": "mysql://[x"}')
