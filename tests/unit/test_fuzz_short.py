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
