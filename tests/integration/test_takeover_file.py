"""Taking over from tidb-binlog's drainer with a ``file`` output (and any output whose checkpoint
tidb-binlog keeps in ``<data-dir>/savepoint``: ``file``, ``pb``, ``kafka``).

tidb-binlog's drainer writes its binlog files into ``[syncer.to] dir``, by default its data-dir,
without a checkpoint of theirs, and its checkpoint into ``<data-dir>/savepoint``
(``tests/support/tidb_binlog_go.py`` has the format). Our file sink takes such a directory over
after its last whole record; a drainer whose sink has no checkpoint starts after the savepoint.
Each case is proven with a real drainer process on real pumps: nothing at or below the point it
takes over from is written again, everything above it is, once, in commit order.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tests.support.pipeline import ORDERS, Pipeline, commit, ddl, row, running_pipeline
from tests.support.tidb_binlog_go import go_savepoint
from tests.support.waits import eventually
from tributary.change import RowChange, TableInfo, Txn
from tributary.ddlhistory import Action
from tributary.sinks.file import pbcodec
from tributary.sinks.file.binlogfile import (
    Record,
    Torn,
    encode,
    read_directory,
    segment_name,
)
from tributary.sinks.file.sink import SAVEPOINT, FileSink, load_savepoint
from tributary.sinks.port import SinkError

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(180)]

TABLE = TableInfo.build("shop", "orders", [("id", "bigint")], ["id"])


def txn(commit_ts: int, *ids: int) -> Txn:
    return Txn(commit_ts, commit_ts - 1, tuple(RowChange.insert(TABLE, {"id": i}) for i in ids))


def go_output(directory: Path, txns: list[Txn], tail: bytes = b"") -> None:
    """A directory as tidb-binlog's ``pb`` syncer leaves it: its ``.lock`` and binlog files of
    ``binlog-%016d-<time>`` holding one pb_binlog record per transaction, ``tail`` after them
    (bytes of a record cut short when the drainer died)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".lock").touch()
    name = segment_name(0, dt.datetime(2024, 5, 1, 10, 0, 0))
    records = b"".join(encode(p) for t in txns if (p := pbcodec.encode_txn(t)) is not None)
    (directory / name).write_bytes(records + tail)


def records(directory: Path) -> list[tuple[int, tuple[int, ...]]]:
    """(commit ts, ids inserted) of every record of the directory, in file order."""
    out = []
    for item in read_directory(directory):
        assert not isinstance(item, Torn), f"torn record at {item.offset}"
        assert isinstance(item, Record)
        t = pbcodec.decode_txn(item.payload)
        out.append((t.commit_ts, tuple(int(str(r.values["id"])) for r in t.rows)))
    return out


async def test_the_file_sink_takes_over_tidb_binlogs_files_after_their_last_record(
    tmp_path: Path,
) -> None:
    torn = encode(pbcodec.encode_txn(txn(40, 4)) or b"")[:-7]
    go_output(tmp_path, [txn(10, 1), txn(20, 2), txn(30, 3)], tail=torn)
    async with await FileSink.open(tmp_path) as sink:
        assert await sink.checkpoint() == 30
        await sink.apply([txn(20, 2), txn(30, 3), txn(40, 4), txn(50, 5)])
    assert records(tmp_path) == [(10, (1,)), (20, (2,)), (30, (3,)), (40, (4,)), (50, (5,))]
    saved = load_savepoint(tmp_path)
    assert saved is not None and saved.commit_ts == 50
    async with await FileSink.open(tmp_path) as sink:
        assert await sink.checkpoint() == 50


async def test_a_directory_of_other_records_is_refused(tmp_path: Path) -> None:
    (tmp_path / segment_name(0, dt.datetime(2024, 5, 1))).write_bytes(encode(b"\xff\xff\xff"))
    with pytest.raises(SinkError, match="not a pb_binlog record"):
        await FileSink.open(tmp_path)
    assert not (tmp_path / SAVEPOINT).exists()


async def wait_for(directory: Path, commit_ts: int) -> None:
    """Until the file sink's checkpoint in ``directory`` reaches ``commit_ts``."""

    def reached() -> bool:
        saved = load_savepoint(directory)
        return saved is not None and saved.commit_ts >= commit_ts

    await eventually(reached, within=60)


async def orders(pipe: Pipeline, version: int, ids: range) -> list[int]:
    """Commit one transaction per id into ``shop.orders``; their commit ts."""
    return [await commit(pipe, row(ORDERS.id, version, rid)) for rid in ids]


async def test_a_drainer_resumes_from_tidb_binlogs_files_and_savepoint(tmp_path: Path) -> None:
    async with running_pipeline(tmp_path, pumps=2) as pipe:
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        c1, c2 = await orders(pipe, version, range(1, 3))

        # 1. tidb-binlog's drainer wrote t1 and t2 into the files of its data-dir (its default
        #    [syncer.to] dir) and died before its savepoint passed t1
        in_place = tmp_path / "go-file"
        go_output(in_place, [txn(c1, 1), txn(c2, 2)])
        (in_place / "savepoint").write_text(go_savepoint(c1, version, consistent=False))
        # 2. its savepoint at t2 in its data-dir; our file sink writes into a new directory
        #    (a kafka output's take-over reads the same file)
        moved, fresh = tmp_path / "go-savepoint", tmp_path / "fresh"
        moved.mkdir()
        (moved / "savepoint").write_text(go_savepoint(c2, version))

        c3, c4 = await orders(pipe, version, range(3, 5))
        await pipe.cluster.start_drainer(f"file://{in_place}", name="go-file")
        await pipe.cluster.start_drainer(f"file://{fresh}", name="go-savepoint")
        (c5,) = await orders(pipe, version, range(5, 6))  # while they run
        await wait_for(in_place, c5)
        await wait_for(fresh, c5)
        for d in pipe.cluster.drainers:
            assert await d.child.stop(30) == 0

    assert records(in_place) == [(c, (i,)) for i, c in enumerate([c1, c2, c3, c4, c5], 1)]
    assert records(fresh) == [(c3, (3,)), (c4, (4,)), (c5, (5,))]
    for data_dir in (in_place, moved):
        # the savepoint tidb-binlog's drainer reads back after a rollback
        assert (data_dir / "savepoint").read_text() == f"consistent = true\ncommitTS = {c5}\n"
