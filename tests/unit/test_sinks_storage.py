"""The storage sink on a real directory: when files appear, what the checkpoint says, naming
across restarts and crashes, table versions around DDLs, the write gate, and a processor that
moves its spans only as the sink's files become durable.

A crash is a sink that is dropped without ``close`` after its files were written and before
``metadata`` moved (what SIGKILL leaves at that point); the integration test kills real
processes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath

import pytest

from services.capture.acks import Acks, Submitted
from services.capture.processor import Processor, ProcessorOptions
from tests.support.capture_fakes import FakeLog
from tributary.cdc.keys import FeedId
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import Pipelined, SinkError, SinkOptions, WriteRefused
from tributary.sinks.file.sink import FileSink
from tributary.sinks.schemes import check_options, open_sink
from tributary.sinks.storage import reader
from tributary.sinks.storage.files import Files
from tributary.sinks.storage.settings import CsvSettings, StorageSettings
from tributary.sinks.storage.sink import StorageSink
from tributary.sinks.storage.store import next_index
from tributary.sinks.storage.versions import TableVersions, concerns

ITEMS = TableInfo.build("shop", "items", [("id", "int"), ("v", "varchar(8)")], primary_key=["id"])
WIDER = TableInfo.build(
    "shop", "items", [("id", "int"), ("v", "varchar(8)"), ("n", "int")], primary_key=["id"]
)
ORDERS = TableInfo.build("shop", "orders", [("id", "int")], primary_key=["id"])
DAY = dt.datetime(2026, 5, 4, 12, 0, 0)


def _settings(root: Path, **kw: object) -> StorageSettings:
    base: dict[str, object] = {
        "flush_interval": 3600.0,  # the tests flush by hand unless they say otherwise
        "file_index_width": 6,
        "terminator": "\n",
        "csv": CsvSettings(include_commit_ts=True),
    }
    return StorageSettings(str(root), **{**base, **kw})  # type: ignore[arg-type]


async def _sink(root: Path, **kw: object) -> StorageSink:
    return await StorageSink.open(_settings(root, **kw), now=lambda: DAY)


def _txn(ts: int, *ids: int, table: TableInfo = ITEMS) -> Txn:
    rows = tuple(
        RowChange.insert(table, {"id": i, "v": f"v{i}"} if table is ITEMS else {"id": i})
        for i in ids
    )
    return Txn(ts, ts - 1, rows)


def _files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".tmp" not in p.parts
    )


def _csv(root: Path, relative: str) -> list[str]:
    return (root / relative).read_text().splitlines()


async def test_rows_wait_in_buffers_until_a_flush_makes_them_durable(tmp_path: Path) -> None:
    sink = await _sink(tmp_path)
    assert isinstance(sink, Pipelined)
    try:
        await sink.submit([_txn(100, 1, 2), _txn(110, 3)])
        await sink.submit([_txn(120, 4, table=ORDERS)])
        assert await sink.checkpoint() is None and _files(tmp_path) == []
        await sink.flush()
        assert await sink.checkpoint() == 120
        assert _files(tmp_path) == [
            "metadata",
            "shop/items/100/2026-05-04/CDC000001.csv",
            "shop/items/100/2026-05-04/meta/CDC.index",
            f"shop/items/meta/schema_100_{_checksum(tmp_path, 'items', 100):010d}.json",
            "shop/orders/120/2026-05-04/CDC000001.csv",
            "shop/orders/120/2026-05-04/meta/CDC.index",
            f"shop/orders/meta/schema_120_{_checksum(tmp_path, 'orders', 120):010d}.json",
        ]
        assert _csv(tmp_path, "shop/items/100/2026-05-04/CDC000001.csv") == [
            '"I","items","shop",100,1,"v1"',
            '"I","items","shop",100,2,"v2"',
            '"I","items","shop",110,3,"v3"',
        ]
        index = tmp_path / "shop/items/100/2026-05-04/meta/CDC.index"
        assert index.read_text() == "CDC000001.csv\n"
        assert (tmp_path / "metadata").read_bytes() == b'{"checkpoint-ts":120}'
        await sink.submit([_txn(130, 5)])  # the next flush: the next file
        await sink.flush()
        assert _csv(tmp_path, "shop/items/100/2026-05-04/CDC000002.csv") == [
            '"I","items","shop",130,5,"v5"'
        ]
        assert index.read_text() == "CDC000002.csv\n"
    finally:
        await sink.close()


async def _crash(sink: StorageSink) -> None:
    """The process dies: no flush, no close (its flush timer and threads just stop)."""
    assert sink._ticker is not None
    sink._ticker.cancel()
    await asyncio.gather(sink._ticker, return_exceptions=True)
    sink._pool.shutdown()


async def _until(ready: Callable[[], bool], within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not ready():  # noqa: ASYNC110 (polling state another task changes)
            await asyncio.sleep(0.01)


def _checksum(root: Path, table: str, version: int) -> int:
    (name,) = [
        p.name
        for p in (root / "shop" / table / "meta").iterdir()
        if p.name.startswith(f"schema_{version}_")
    ]
    return int(name.rsplit("_", 1)[1].removesuffix(".json"))


async def test_the_flush_interval_writes_by_itself(tmp_path: Path) -> None:
    sink = await _sink(tmp_path, flush_interval=0.05)
    try:
        await sink.submit([_txn(100, 1)])
        await _until(lambda: sink._durable == 100)
        # the ticker moves the checkpoint, then writes metadata: wait for the file too
        await _until(lambda: (tmp_path / "metadata").exists())
        assert (tmp_path / "metadata").read_bytes() == b'{"checkpoint-ts":100}'
    finally:
        await sink.close()


async def test_a_full_buffer_is_written_at_once_and_the_checkpoint_stops_below_the_rest(
    tmp_path: Path,
) -> None:
    sink = await _sink(tmp_path, file_size=60)
    try:
        await sink.submit([_txn(100, 1, table=ORDERS)])  # small: stays buffered
        await sink.submit([_txn(110, 1), _txn(120, 2)])  # items reaches 60 bytes at 120
        assert (tmp_path / "shop/items/110/2026-05-04/CDC000001.csv").exists()
        assert not (tmp_path / "shop/orders").exists()
        assert await sink.checkpoint() == 99  # orders' row at 100 is not in a file yet
        assert not (tmp_path / "metadata").exists()  # written with full flushes only
        await sink.flush()
        assert await sink.checkpoint() == 120
    finally:
        await sink.close()


async def test_replays_at_or_below_metadata_are_dropped_and_numbering_goes_on(
    tmp_path: Path,
) -> None:
    sink = await _sink(tmp_path)
    await sink.submit([_txn(100, 1), _txn(110, 2)])
    await sink.flush()
    await sink.close()

    again = await _sink(tmp_path)
    try:
        assert await again.checkpoint() == 110
        await again.submit([_txn(100, 1), _txn(110, 2), _txn(120, 3)])  # a replay from 90
        await again.flush()
        # a restart starts a version of its own (TiCDC: "the table version changes when the
        # changefeed restarts"): what the run knows of DDLs begins at the checkpoint
        assert _csv(tmp_path, "shop/items/120/2026-05-04/CDC000001.csv") == [
            '"I","items","shop",120,3,"v3"'
        ]
        assert len(_csv(tmp_path, "shop/items/100/2026-05-04/CDC000001.csv")) == 2
    finally:
        await again.close()


async def test_after_a_crash_rows_past_metadata_are_written_again_in_new_files(
    tmp_path: Path,
) -> None:
    sink = await _sink(tmp_path)
    await sink.submit([_txn(100, 1)])
    await sink.flush()  # metadata 100
    await sink.submit([_txn(110, 2), _txn(120, 3)])
    await sink._write([k for k, b in sink._buffers.items() if b.chunks])  # files, no metadata
    (tmp_path / ".tmp" / "half-written.tmp").write_bytes(b"torn")  # a write cut short
    first = (tmp_path / "shop/items/100/2026-05-04/CDC000002.csv").read_bytes()
    await _crash(sink)

    again = await _sink(tmp_path)
    try:
        assert await again.checkpoint() == 100
        assert list((tmp_path / ".tmp").iterdir()) == []
        await again.submit([_txn(110, 2), _txn(120, 3)])
        await again.flush()
        # the file a consumer may have read is untouched; the replay is a new file
        assert (tmp_path / "shop/items/100/2026-05-04/CDC000002.csv").read_bytes() == first
        assert _csv(tmp_path, "shop/items/100/2026-05-04/CDC000003.csv") == [
            '"I","items","shop",110,2,"v2"',
            '"I","items","shop",120,3,"v3"',
        ]
        assert (tmp_path / "metadata").read_bytes() == b'{"checkpoint-ts":120}'
    finally:
        await again.close()


def test_next_index_follows_the_index_file_and_the_directory(tmp_path: Path) -> None:
    files = Files(tmp_path)
    files.open()
    d = PurePosixPath("s/t/1")
    assert next_index(files, d, ".csv") == 1
    files.replace(d / "meta/CDC.index", b"CDC000005.csv\n")
    assert next_index(files, d, ".csv") == 5  # named but never written: that number again
    assert files.create(d / "CDC000005.csv", b"x")
    assert next_index(files, d, ".csv") == 6
    assert files.create(d / "CDC000009.csv", b"y")  # a file the index does not name
    assert next_index(files, d, ".csv") == 10
    assert not files.create(d / "CDC000009.csv", b"z")  # never replaced
    assert (tmp_path / d / "CDC000009.csv").read_bytes() == b"y"


def test_table_versions_follow_ddls_and_restarts() -> None:
    meta: dict[tuple[str, str], list[str]] = {}

    def listing(schema: str, table: str) -> list[str]:
        return meta.get((schema, table), [])

    v = TableVersions(listing, barrier=50)
    first = v.place(ITEMS, 100)
    assert first.version == 100 and first.schema_file is not None
    assert v.place(ITEMS, 150).version == 100  # placed already
    path, doc = v.ddl(Ddl("shop", "ALTER TABLE items ADD n int", "items"), 200, 5)
    assert path.startswith("shop/items/meta/schema_200_")
    assert json.loads(doc)["Query"] == "ALTER TABLE items ADD n int"
    wider = v.place(WIDER, 210)
    assert wider.version == 210 and wider.schema_file is not None
    assert v.place(ORDERS, 220).version == 220  # a table the DDL does not name
    v.ddl(Ddl("shop", "RENAME TABLE t0 TO orders", "t0"), 300, 14)
    assert v.place(ORDERS, 310).version == 310  # named by the rename: a new version

    # a restart with checkpoint 250: items' version 210 (made before it) is not reused
    meta[("shop", "items")] = [Path(first.schema_file[0]).name, Path(wider.schema_file[0]).name]
    restarted = TableVersions(listing, barrier=250)
    assert restarted.place(WIDER, 260).version == 260
    # one made after the checkpoint is (a crash right after a new version started)
    late = TableVersions(listing, barrier=205)
    assert late.place(WIDER, 230).version == 210 and late.place(WIDER, 230).schema_file is None


def test_which_tables_a_ddl_concerns() -> None:
    assert concerns(Ddl("shop", "ALTER TABLE items ADD c int", "items"), "shop", "items")
    assert concerns(Ddl("shop", "RENAME TABLE a TO `items`", "a"), "shop", "items")
    assert concerns(Ddl("shop", "DROP DATABASE shop", ""), "shop", "items")
    assert not concerns(Ddl("shop", "ALTER TABLE items2 ADD c int", "items2"), "shop", "items")
    assert not concerns(Ddl("shop", "CREATE DATABASE other", ""), "other2", "items")


async def test_a_ddl_writes_everything_before_it_then_its_schema_file(tmp_path: Path) -> None:
    sink = await _sink(tmp_path)
    try:
        await sink.submit(
            [
                _txn(100, 1),
                Txn(200, 199, ddl=Ddl("shop", "ALTER TABLE items ADD n int", "items")),
                Txn(210, 209, (RowChange.insert(WIDER, {"id": 2, "v": "b", "n": 7}),)),
                Txn(300, 299, ddl=Ddl("shop2", "CREATE DATABASE shop2", "")),
            ]
        )
        assert await sink.checkpoint() == 300  # each DDL wrote everything before it
    finally:
        await sink.close()
    scan = reader.scan(Files(tmp_path), _settings(tmp_path))
    queries = {k: s.definition.query for k, s in scan.schemas.items()}
    assert queries == {
        ("shop", "items", 100): "",
        ("shop", "items", 200): "ALTER TABLE items ADD n int",
        ("shop", "items", 210): "",
        ("shop2", "", 300): "CREATE DATABASE shop2",
    }
    assert scan.schemas[("shop", "items", 200)].definition.type == 5  # TiDB's ADD COLUMN
    assert scan.schemas[("shop2", "", 300)].definition.type == 1  # CREATE SCHEMA
    assert [p.version for p, _ in scan.data] == [100, 210]
    rows = [
        (ts, r.values)
        for p, rel in scan.data
        for ts, r in reader.read_rows(
            Files(tmp_path),
            rel,
            scan.schemas[("shop", "items", p.version)].definition,
            _settings(tmp_path),
        )
    ]
    assert rows == [(100, {"id": 1, "v": "v1"}), (210, {"id": 2, "v": "b", "n": 7})]
    assert reader.checkpoint(Files(tmp_path)) == 300


async def test_canal_json_lines(tmp_path: Path) -> None:
    sink = await _sink(tmp_path, protocol="canal-json", tidb_extension=True)
    try:
        await sink.submit([_txn(100, 1)])
        await sink.flush()
    finally:
        await sink.close()
    (line,) = _csv(tmp_path, "shop/items/100/2026-05-04/CDC000001.json")
    msg = json.loads(line)
    assert (msg["database"], msg["table"], msg["type"], msg["data"]) == (
        "shop",
        "items",
        "INSERT",
        [{"id": "1", "v": "v1"}],
    )
    assert msg["_tidb"] == {"commitTs": 100}


async def test_the_write_gate_stops_files_and_the_sink(tmp_path: Path) -> None:
    sink = await _sink(tmp_path)

    def refuse() -> None:
        raise WriteRefused("the lease may expire")

    try:
        await sink.submit([_txn(100, 1)])
        sink.write_gate = refuse
        with pytest.raises(WriteRefused):
            await sink.flush()
        assert _files(tmp_path) == [] and await sink.checkpoint() is None
        with pytest.raises(WriteRefused):
            await sink.submit([_txn(110, 2)])  # broken until reopened
    finally:
        await sink.close()


async def test_a_failed_write_is_retriable_and_breaks_the_sink(tmp_path: Path) -> None:
    sink = await _sink(tmp_path)
    try:
        await sink.submit([_txn(100, 1)])
        (tmp_path / "shop").write_text("a file where a directory goes")
        with pytest.raises(SinkError) as e:
            await sink.flush()
        assert e.value.retriable and await sink.checkpoint() is None
        with pytest.raises(SinkError):
            await sink.submit([_txn(110, 2)])
    finally:
        await sink.close()


async def test_the_file_scheme_opens_a_storage_sink_only_with_a_protocol(tmp_path: Path) -> None:
    async with open_sink(f"file://{tmp_path}/a?protocol=csv", SinkOptions(1)) as s:
        assert isinstance(s, StorageSink)
    async with open_sink(f"file://{tmp_path}/b", SinkOptions(1)) as f:
        assert isinstance(f, FileSink)
    check_options(f"file://{tmp_path}/b?segment-size=1MiB")
    with pytest.raises(SinkError, match="date-separator"):
        check_options(f"file://{tmp_path}/c?protocol=csv&date-separator=hour")


# -- the processor -----------------------------------------------------------------------------


def test_acks_release_in_order() -> None:
    acks = Acks()
    acks.add(Submitted(100, 100, "p100", 1, 1, 100))
    acks.add(Submitted(110, 110, "p110", 1, 1, 110))
    acks.add(Submitted(None, 120, "p120", 0, 0, None))
    assert acks.release(None) == []
    assert [b.commit_ts for b in acks.release(105)] == [100]
    assert [b.commit_ts for b in acks.release(110)] == [110, 120]
    assert not acks


async def test_a_processor_moves_its_checkpoint_only_past_durable_files(tmp_path: Path) -> None:
    log = FakeLog()
    await log.append(5)  # commit ts 1001..1005
    opened: list[StorageSink] = []

    @asynccontextmanager
    async def opener(uri: str, options: SinkOptions) -> AsyncIterator[StorageSink]:
        sink = await _sink(tmp_path)
        opened.append(sink)
        try:
            yield sink
        finally:
            await sink.close()

    info = ChangeFeedInfo("default", "cf-1", f"file://{tmp_path}?protocol=csv", 1000)
    opts = ProcessorOptions(batch_txns=2, backoff_min=0.01, backoff_max=0.02, ack_poll=0.01)
    p = Processor(
        "default",
        "h:1",
        FeedId("default", "cf-1"),
        info,
        ChangeFeedStatus(1000, "0"),
        log,
        opener,
        opts,
    )
    task = asyncio.create_task(p.run())
    try:
        await _until(lambda: bool(opened) and p.resolved_ts >= 1005)
        await asyncio.sleep(0.1)  # ten looks at the sink's checkpoint
        assert await opened[0].checkpoint() is None
        assert p.checkpoint_ts == 1000 and p.applied_rows == 0  # buffered, not durable
        await opened[0].flush()
        await _until(lambda: p.checkpoint_ts == 1005)
        assert p.position == "5" and p.applied_rows == 5
        assert reader.checkpoint(Files(tmp_path)) == 1005
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
