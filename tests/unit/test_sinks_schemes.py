"""Sinks are chosen by URL scheme, opened with the options, and closed when the context ends."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.blackhole.sink import BlackholeSink
from tributary.sinks.schemes import OPENERS, open_sink, scheme_of
from tributary.sinks.sqlite.sink import SqliteSink
from tributary.sinks.urls import redact, unknown_options

OPTS = SinkOptions(cluster_id=7)
T = TableInfo.build("s", "t", [("id", "int")], ["id"])


def test_redact_hides_only_the_password() -> None:
    assert redact("mysql://u:secret@h:1/?x=1") == "mysql://u:******@h:1/?x=1"
    assert redact("mysql://u@h:1/") == "mysql://u@h:1/"
    assert redact("sqlite:///a/b.db") == "sqlite:///a/b.db"
    assert redact("mysql://u:secret@h:1/", mask="xxxxx") == "mysql://u:xxxxx@h:1/"  # TiCDC's


def test_known_schemes() -> None:
    assert set(OPENERS) == {"sqlite", "blackhole", "print", "file", "s3", "mysql", "pump", "kafka"}
    assert scheme_of("SQLite:///x.db") == "sqlite"
    assert scheme_of("tidb://root@127.0.0.1:4000/") == "mysql"  # TiCDC's name, the same sink


async def test_unknown_scheme_lists_the_known_ones() -> None:
    known = r"blackhole://, file://, kafka://, mysql://, print://, pump://, s3://, sqlite://"
    with pytest.raises(SinkError, match=known) as e:
        async with open_sink("nosuch://127.0.0.1:9092", OPTS):
            pass
    assert not e.value.retriable
    with pytest.raises(SinkError) as e:
        async with open_sink("nosuch://u:s3cret@127.0.0.1:9092", OPTS):
            pass
    assert "s3cret" not in str(e.value) and "nosuch://u:******@127.0.0.1:9092" in str(e.value)


async def test_sqlite_url_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / "abs.db"
    async with open_sink(f"sqlite://{absolute}", OPTS) as sink:
        assert isinstance(sink, SqliteSink)
        await sink.apply([Txn(5)])
    assert absolute.exists()
    monkeypatch.chdir(tmp_path)
    async with open_sink("sqlite://x.db", OPTS) as sink:
        assert await sink.checkpoint() is None
    (tmp_path / "data").mkdir()
    async with open_sink("sqlite://data/y.db", OPTS) as sink:
        assert await sink.checkpoint() is None
    assert (tmp_path / "x.db").exists() and (tmp_path / "data" / "y.db").exists()
    async with open_sink(f"sqlite://{absolute}", OPTS) as sink:  # same file: same checkpoint
        assert await sink.checkpoint() == 5
    async with open_sink(f"sqlite://{absolute}", SinkOptions(cluster_id=8)) as sink:
        assert await sink.checkpoint() is None  # another upstream cluster's row
    with pytest.raises(SinkError):
        async with open_sink("sqlite://", OPTS):
            pass


async def test_safe_mode_option_reaches_the_sink(tmp_path: Path) -> None:
    async with open_sink(f"sqlite://{tmp_path}/s.db", SinkOptions(7, safe_mode=True)) as sink:
        assert isinstance(sink, SqliteSink) and sink.safe_mode


async def test_sink_is_closed_after_the_context_even_on_error() -> None:
    kept: list[BlackholeSink] = []
    with pytest.raises(RuntimeError):
        async with open_sink("blackhole://", OPTS) as sink:
            assert isinstance(sink, BlackholeSink)
            kept.append(sink)
            raise RuntimeError("boom")
    with pytest.raises(SinkError, match="closed"):
        await kept[0].apply([Txn(1)])


async def test_blackhole_counts_and_keeps_checkpoint_in_memory() -> None:
    sink = BlackholeSink()
    rows = tuple(RowChange.insert(T, {"id": i}) for i in range(3))
    await sink.apply([Txn(10, rows=rows), Txn(11, ddl=Ddl("s", "drop table t")), Txn(12)])
    await sink.apply([Txn(11, rows=rows[:1]), Txn(13, rows=rows[:2])])  # 11 is a replay
    assert (sink.txns, sink.rows, sink.ddls) == (2, 5, 1)
    assert await sink.checkpoint() == 13
    assert await BlackholeSink().checkpoint() is None


# Every scheme, with an option it knows and one it does not (nothing is connected to: the URL
# is refused before). A new scheme must be added here.
UNKNOWN_OPTION_URLS = {
    "sqlite": ("sqlite:///{tmp}/x.db?journal=wal", "it takes no options"),
    "blackhole": ("blackhole://?journal=wal", "it takes no options"),
    "print": ("print://?journal=wal", "it takes no options"),
    "file": ("file:///{tmp}/f?segment-size=1MiB&journal=wal", "retention-time, segment-size"),
    "mysql": ("mysql://u:s3cret@127.0.0.1:1/?consistent=true&journal=wal", "worker-count"),
    "pump": ("pump://127.0.0.1:1/?name=x&journal=wal", "cluster-id, name, ssl-ca"),
    "kafka": ("kafka://127.0.0.1:1/t?kafka-max-messages=5&journal=wal", "kafka-version"),
    "s3": (
        "s3://cdc/p?protocol=csv&access-key=a&secret-access-key=s3cret&journal=wal",
        "secret-access-key, session-token",
    ),
}


def test_every_scheme_has_an_unknown_option_case() -> None:
    assert set(UNKNOWN_OPTION_URLS) == set(OPENERS)


@pytest.mark.parametrize("scheme", sorted(UNKNOWN_OPTION_URLS))
async def test_an_unknown_option_is_refused_naming_it_and_the_known_ones(
    scheme: str, tmp_path: Path
) -> None:
    url, known = UNKNOWN_OPTION_URLS[scheme]
    with pytest.raises(SinkError) as e:
        async with open_sink(url.format(tmp=tmp_path), OPTS):
            pass
    message = str(e.value)
    assert "'journal'" in message and known in message, message
    assert "s3cret" not in message
    assert not e.value.retriable
    assert os.listdir(tmp_path) == []  # refused before anything was created


async def test_canal_json_refuses_an_unknown_option_too() -> None:
    with pytest.raises(SinkError, match=r"unknown options \['journal'\]; known: .*dispatcher"):
        async with open_sink("kafka://127.0.0.1:1/t?protocol=canal-json&journal=wal", OPTS):
            pass


def test_unknown_options_names_every_unknown_key() -> None:
    url = urlsplit("sqlite:///x.db?b=1&a=2&a=3")
    assert unknown_options(url, ()) == "unknown options 'a', 'b'; it takes no options"
    assert unknown_options(url, ("a", "b")) == ""
    assert unknown_options(urlsplit("file:///d?z=1"), ("y", "x")) == (
        "unknown option 'z'; the known options are x, y"
    )
