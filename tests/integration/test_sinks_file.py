"""The file sink on a real directory: batches -> records, the savepoint, crash recovery, retention.

The kill -9 test runs ``tests.support.file_writer`` as a child process.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.file_writer import ins
from tributary.change import Ddl, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.file.binlogfile import (
    Record,
    encode,
    list_segments,
    read_directory,
    segment_name,
)
from tributary.sinks.file.pbcodec import decode_txn, encode_txn
from tributary.sinks.file.sink import SAVEPOINT, FileSink, open_url

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = SinkOptions(cluster_id=1)


def records(directory: Path) -> list[Txn]:
    out = []
    for item in read_directory(directory):
        assert isinstance(item, Record), f"unexpected {item}"
        out.append(decode_txn(item.payload))
    return out


def shape(txns: list[Txn]) -> list[tuple[object, ...]]:
    return [
        (t.commit_ts, t.ddl, [(r.kind, r.table.qualified, dict(r.values)) for r in t.rows])
        for t in txns
    ]


async def test_batches_become_records_and_survive_a_reopen(tmp_path: Path) -> None:
    out = tmp_path / "out"
    url = urlsplit(f"file://{out}?segment-size=1KiB&retention-time=0")
    first = [
        Txn(10, 9, ddl=Ddl("shop", "CREATE DATABASE shop")),
        Txn(11, 10, ddl=Ddl("shop", "CREATE TABLE acct (id INT PRIMARY KEY, name TEXT)", "acct")),
        ins(12, 1, 2),
    ]
    second = [
        Txn(13, 12),
        *[ins(ts, ts) for ts in range(14, 40)],
        Txn(40, 39),
    ]  # markers at the ends
    async with await open_url(url, OPTIONS) as sink:
        assert await sink.checkpoint() is None and sink.safe_mode is False
        await sink.apply(first)
        await sink.apply(second)
        assert await sink.checkpoint() == 40
    written = [t for t in first + second if t.rows or t.ddl]
    assert shape(records(out)) == shape(written)
    assert len(list_segments(out)) >= 3  # rotated at 1 KiB
    saved = tomllib.loads((out / SAVEPOINT).read_text())
    newest = list_segments(out)[-1]
    assert saved == {
        "consistent": True,
        "commitTS": 40,
        "schema-version": 0,
        "segment": newest.name,
        "offset": newest.path.stat().st_size,
    }
    async with await FileSink.open(out, segment_size=1024) as sink:
        assert await sink.checkpoint() == 40
        await sink.apply([ins(39, 99), ins(40, 99)])  # a replay: nothing new
        await sink.apply([Txn(41, 40), ins(42, 42)])
        assert await sink.checkpoint() == 42
    assert shape(records(out)) == shape([*written, ins(42, 42)])


async def test_urls() -> None:
    for bad, message in (
        ("file://", "no directory"),
        ("file:///x?segment-size=1KiB&gc=7", "unknown option .gc.; the known options are"),
        ("file:///x?segment-size=lots", "segment-size"),
        ("file:///x?retention-time=nan", "retention-time"),
        ("file:///x?segment-size=0", "segment-size must be > 0"),
    ):
        with pytest.raises(SinkError, match=message):
            await open_url(urlsplit(bad), OPTIONS)


async def test_relative_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with await open_url(urlsplit("file://rel/dir"), OPTIONS) as sink:
        await sink.apply([ins(5, 1)])
    assert shape(records(tmp_path / "rel" / "dir")) == shape([ins(5, 1)])


async def test_a_batch_written_but_not_checkpointed_is_cut_away_on_open(tmp_path: Path) -> None:
    async with await FileSink.open(tmp_path, segment_size=300) as sink:
        await sink.apply([ins(1, 1), ins(2, 2)])
    # The crash: the next batch reached the files (past a rotation, its last record torn), but
    # the process died before the savepoint named it.
    newest = list_segments(tmp_path)[-1]
    with newest.path.open("ab") as f:
        f.write(b"".join(encode(encode_txn(ins(ts, ts)) or b"") for ts in (3, 4)))
    later = tmp_path / segment_name(newest.index + 1, dt.datetime.now())
    later.write_bytes(encode(encode_txn(ins(5, 5)) or b"") + encode(b"torn")[:9])
    async with await FileSink.open(tmp_path, segment_size=300) as sink:
        assert await sink.checkpoint() == 2
        assert shape(records(tmp_path)) == shape([ins(1, 1), ins(2, 2)])
        assert not later.exists()
        await sink.apply([ins(3, 3), ins(4, 40)])  # the drainer sends them again
    assert shape(records(tmp_path)) == shape([ins(1, 1), ins(2, 2), ins(3, 3), ins(4, 40)])


async def test_a_failed_batch_leaves_nothing_behind(tmp_path: Path) -> None:
    async with await FileSink.open(tmp_path) as sink:
        await sink.apply([ins(1, 1)])
        saved = (tmp_path / SAVEPOINT).read_text()
        (tmp_path / SAVEPOINT).unlink()
        (tmp_path / SAVEPOINT).mkdir()  # the savepoint can no longer be replaced
        (tmp_path / SAVEPOINT / "x").write_text("")
        with pytest.raises(SinkError, match="batch up to commit ts 3"):
            await sink.apply([ins(2, 2), ins(3, 3)])
        assert await sink.checkpoint() == 1
        assert shape(records(tmp_path)) == shape([ins(1, 1)])
        (tmp_path / SAVEPOINT / "x").unlink()
        (tmp_path / SAVEPOINT).rmdir()
        (tmp_path / SAVEPOINT).write_text(saved)
        await sink.apply([ins(2, 2), ins(3, 3)])
    assert shape(records(tmp_path)) == shape([ins(1, 1), ins(2, 2), ins(3, 3)])


async def test_a_directory_of_someone_elses_segments_is_refused(tmp_path: Path) -> None:
    (tmp_path / "binlog-0000000000000000").write_bytes(encode(b"x"))
    with pytest.raises(SinkError, match=r"no sink\.checkpoint"):
        await FileSink.open(tmp_path)
    (tmp_path / "binlog-0000000000000000").write_bytes(b"")  # empty: a first open that died
    async with await FileSink.open(tmp_path) as sink:
        await sink.apply([ins(1, 1)])
    assert shape(records(tmp_path)) == shape([ins(1, 1)])


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_retention_removes_old_segments_but_never_the_newest(tmp_path: Path) -> None:
    clock = Clock(1_700_000_000.0)
    day = 86400.0
    sink = await FileSink.open(tmp_path, segment_size=100, retention_days=1, clock=clock)
    async with sink:
        await sink.apply([ins(ts, ts) for ts in range(1, 9)])
        segments = list_segments(tmp_path)
        assert len(segments) >= 4
        old, recent, newest = segments[:2], segments[2:-1], segments[-1]
        for s in [*old, newest]:
            os.utime(s.path, (clock.now - 2 * day, clock.now - 2 * day))
        for s in recent:
            os.utime(s.path, (clock.now - day / 2, clock.now - day / 2))
        clock.now += 1800  # within the hour since the last sweep (at open): no sweep
        await sink.apply([Txn(9, 8)])
        assert list_segments(tmp_path) == segments
        clock.now += 7200
        await sink.apply([Txn(10, 9)])  # a marker: the newest segment keeps its old mtime
        assert list_segments(tmp_path) == [*recent, newest]
        clock.now += 2 * day
        await sink.apply([Txn(11, 10)])
        assert list_segments(tmp_path) == [newest]
        await sink.apply([ins(12, 12)])
    assert [t.commit_ts for t in records(tmp_path)][-1] == 12


async def _run_and_kill(directory: Path, acks: int) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.file_writer", str(directory),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    last = 0
    try:
        for _ in range(acks):
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, "writer exited early"
            last = int(line)
    finally:
        proc.kill()  # SIGKILL mid-stream
        await proc.wait()
    return last


async def test_kill_9_while_writing_keeps_checkpoint_and_records_in_agreement(
    tmp_path: Path,
) -> None:
    for round_ in range(2):
        acked = await _run_and_kill(tmp_path, 40)
        async with await FileSink.open(tmp_path, segment_size=4096) as sink:
            checkpoint = await sink.checkpoint()
        assert checkpoint is not None and checkpoint >= acked
        got = records(tmp_path)
        assert [t.commit_ts for t in got] == list(range(1, checkpoint + 1)), f"round {round_}"
        assert shape(got[-1:]) == shape([ins(checkpoint, checkpoint, checkpoint + 1_000_000)])
    assert len(list_segments(tmp_path)) > 2
