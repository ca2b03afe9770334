"""The fuzz targets of ``bench.fuzz``, a short run each: no crash, no hang (``make test``)."""

from __future__ import annotations

import pytest

from bench.fuzz.__main__ import run
from bench.fuzz.targets import TARGETS


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target_short_run(target: str) -> None:
    out = run(target, 300, 1, 5.0)
    assert out["crashes"] == 0 and out["hangs"] == 0, out


def test_the_reparo_target_survives_its_scratch_directory_being_removed() -> None:
    """A clean-clone run failed every ``reparo_file`` input: the directory the target made at
    import (pytest's collection) was cleaned away as a leftover while the suite ran."""
    import shutil

    from bench.fuzz import message_targets

    seed = message_targets.reparo_seeds()[0]
    message_targets.reparo_file(seed)
    shutil.rmtree(message_targets._reparo_dir())
    message_targets.reparo_file(seed)


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


def test_deeply_nested_value_expressions_are_refused_by_depth() -> None:
    """Found by fuzzing value_expr: ``-020 and 0 and((((...`` 124 parentheses deep was a
    RecursionError out of the expression parser (an HTTP 500 as a changefeed's filter)."""
    from bench.fuzz.config_targets import value_expr
    from services.capture.errors import BadRequest
    from services.capture.sqlexpr import MAX_NESTING, compile_expr

    found = b"-020 and 0  and" + b"(" * 124 + b"-020 and TTRand TTRUE"
    with pytest.raises(BadRequest, match="nested more than"):
        value_expr(found)
    row = {"a": 1}
    assert compile_expr("(" * MAX_NESTING + "a = 1" + ")" * MAX_NESTING)(row) is True
    assert compile_expr("NOT " * MAX_NESTING + "a = 1")(row) is True  # an even count
    assert compile_expr("-" * MAX_NESTING + "a = 1")(row) is True
    for deeper in ("(" * 65 + "a" + ")" * 65, "NOT " * 65 + "a", "- " * 65 + "a"):
        with pytest.raises(BadRequest, match="nested more than 64"):
            compile_expr(deeper)
    # a long chain of one operator is flat: no depth, however long
    assert compile_expr(" + ".join(["a"] * 3000) + " = 3000")(row) is True
    assert compile_expr(" or ".join(["a = 2"] * 3000) + " or a = 1")(row) is True


@pytest.mark.parametrize(
    ("target", "raw"),
    [
        ("storage_csv", b'"I","orders","shop",1x,true,7,"15.00","paid",\\N,1.5\n'),  # commit ts
        ("storage_csv", b'"I","orders","shop",10,true,seven,"15.00","paid",\\N,1.5\n'),
        ("storage_csv", b'"I","orders","shop",10,true,7,"1.5.0","paid",\\N,1.5\n'),
        ("storage_schema", b'{"Schema": "shop", "Table": "orders", "TableColumnsTotal": "0"}'),
        ("storage_schema", b'{"Schema": "shop", "TableVersion": "v1", "TableColumnsTotal": 0}'),
        ("storage_schema", b'{"Schema": "shop", "TableColumns": 5, "TableVersion": 1}'),
        ("storage_schema", b"\xff"),
    ],
)
def test_what_a_storage_consumer_cannot_read_is_a_tributary_error(target: str, raw: bytes) -> None:
    """A number's text, a missing key or a wrong JSON type in a storage sink's files is the
    sink's own error (``SinkError``), which a consumer can tell from a bug."""
    from tributary.sinks.port import SinkError

    with pytest.raises(SinkError):
        TARGETS[target][0](raw)
