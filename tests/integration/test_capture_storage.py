"""MariaDB -> a real capture process -> the storage sink (``file://...?protocol=csv``, and
``s3://...`` on a real S3-compatible server, SeaweedFS) -> a consumer following TiCDC's layout
(reading the directory, or the objects through the S3 API) -> another MariaDB, with the capture
SIGKILLed in the middle of the load; then a Spark job (``services.spark.storage_lake``, a real
process) turns the same files into a Parquet lake.

Proves: TiCDC's layout on disk (``metadata``, schema files per table version and for DDLs,
``<version>/<date>/CDC<n>.csv`` with ``meta/CDC.index``); the checker finds the rebuilt
downstream equal to the upstream, every column type of ``kinds`` included, across ALTER TABLE,
CREATE TABLE, a key-changing UPDATE and the kill; the kill left files past the checkpoint, the
restarted capture wrote those rows again in new files (never over an existing one: every file
seen before the restart is byte for byte the same after it), and the consumer dropped the
repeats by commit ts; and the lake holds, per table, exactly the upstream's rows.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow.parquet as pq
import pytest

from tests.support.capture import (
    ROOT,
    capture_cli,
    shop_equal,
    shop_load,
    start_capture,
    wait_for,
    write_shop,
)
from tests.support.storage_consumer import StorageConsumer
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import ChangeFeedStatus
from tributary.coord.etcd import EtcdKv
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink
from tributary.sinks.storage import reader
from tributary.sinks.storage.settings import parse_url
from tributary.sinks.storage.store import Store, open_store

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb", "tests.support.seaweedfs"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(420)]

KINDS = (
    "CREATE TABLE shop.kinds (id INT PRIMARY KEY, u BIGINT UNSIGNED, d DECIMAL(12,3),"
    " f FLOAT, g DOUBLE, s VARCHAR(32), t TEXT, b VARBINARY(16), bl BLOB, dt DATETIME(3),"
    " da DATE, ti TIME, ts TIMESTAMP NULL, e ENUM('new','paid','sent'), st SET('a','b','c'),"
    " bi BIT(8), y YEAR, j JSON)"
)


def _kinds_row(i: int) -> str:
    return (
        f"({i}, {2**64 - 1 - i}, {i}.125, {i}.5, {i * 1.1}, 'name \"{i}\", with, commas',"
        f" 'line one\\nline two {i}', X'00ff{i:02x}', X'{'ab' * i}', '2026-11-21 10:00:00.{i:03d}',"
        f" '2026-11-{1 + i % 28:02d}', '12:34:{i % 60:02d}', '2026-01-02 03:04:05',"
        f" 'paid', 'a,c', b'1010{i % 2}101', {1990 + i}, '{{\"k\": {i}}}')"
    )


async def _blobs(up: MariaDBServer, stop: asyncio.Event) -> int:
    """Rows of about 8 KiB (so files reach file-size between flushes) until ``stop``."""
    rng = random.Random(11)
    n = 0
    async with up.connect("shop") as conn, conn.cursor() as cur:
        while not stop.is_set():
            await cur.execute("BEGIN")
            await cur.execute(
                "INSERT INTO blobs (body) VALUES (%s)", (os.urandom(8192).hex()[:8192],)
            )
            if n % 7 == 3:
                await cur.execute("DELETE FROM blobs WHERE id = %s", (rng.randint(1, n),))
            await cur.execute("COMMIT")
            n += 1
            await asyncio.sleep(0.005)
    return n


async def _checkpoint(port: int, above: int) -> int | None:
    """The changefeed's checkpoint in etcd, once it is above ``above``."""
    out = json.loads(await capture_cli(port, "changefeed", "query", "-c", "to-files"))
    ts = int(out["checkpoint_tso"])
    return ts if ts > above else None


async def _rows_past(store: Store, settings: Any, port: int) -> list[str]:
    """Data files holding a row above the changefeed's checkpoint (and ``metadata``'s)."""
    written = await asyncio.to_thread(reader.checkpoint, store)
    checkpoint = max(await _checkpoint(port, 0) or 0, written or 0)
    return await asyncio.to_thread(_files_above, store, settings, checkpoint)


def _files_above(store: Store, settings: Any, checkpoint: int) -> list[str]:
    scan = reader.scan(store, settings)
    past = []
    for place, relative in scan.data:
        definition = scan.schemas[(place.schema, place.table, place.version)].definition
        rows = reader.read_rows(store, relative, definition, settings)
        if any(ts > checkpoint for ts, _ in rows):
            past.append(relative)
    return past


async def _stored_checkpoint(endpoint: str) -> int:
    """The changefeed's checkpoint as etcd holds it: where a capture started now resumes."""
    async with EtcdKv.connect([endpoint]) as kv:
        kv_pair = await kv.get(Keys().status_key(FeedId("default", "to-files")))
    assert kv_pair is not None
    return ChangeFeedStatus.from_json(kv_pair.value).checkpoint_ts


def _all_files(store: Store) -> dict[str, bytes | None]:
    return {p: store.read(PurePosixPath(p)) for p in store.walk()}


CSV_OPTIONS = (
    "protocol=csv&flush-interval=5s&file-size=1MiB&worker-count=4"
    "&date-separator=day&file-index-width=6&csv.include-commit-ts=true"
)


@pytest.mark.parametrize("backend", ["file", "s3"])
async def test_capture_to_storage_sink_rebuilt_equal_across_a_kill_and_into_a_lake(
    backend: str,
    tmp_path: Path,
    etcd: EtcdProcess,
    mariadb_instance: InstanceFactory,
    request: pytest.FixtureRequest,
) -> None:
    """``file``: a directory; ``s3``: a bucket prefix on SeaweedFS, every file an object written
    with a conditional PUT and read back through the S3 API by the consumer and the lake job."""
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    if backend == "s3":
        uri = request.getfixturevalue("seaweedfs").uri("changefeeds/to-files", CSV_OPTIONS)
    else:
        uri = f"file://{tmp_path / 'cdc'}?{CSV_OPTIONS}"
    settings = parse_url(urlsplit(uri))
    store = open_store(settings)  # the sink opens it; the test only reads
    upstream = up.dsn() + "?server-id=4421"
    capture, port = start_capture(etcd.endpoint, upstream, tmp_path / "c.log")
    stop, done = asyncio.Event(), asyncio.Event()
    loads: list[asyncio.Task[int]] = []
    try:
        await capture_cli(port, "changefeed", "create", "-c", "to-files", "--sink-uri", uri)
        await up.execute("CREATE DATABASE shop")
        await up.execute(KINDS)
        for name in ("t1", "t2"):
            await up.execute(f"CREATE TABLE shop.{name} (id INT PRIMARY KEY, v INT)")
        await up.execute("CREATE TABLE shop.blobs (id INT AUTO_INCREMENT PRIMARY KEY, body TEXT)")
        await write_shop(up, [f"INSERT INTO kinds VALUES {_kinds_row(i)}" for i in range(1, 9)])
        await write_shop(up, ["INSERT INTO kinds (id) VALUES (100)"])  # NULLs
        loads = [
            asyncio.create_task(
                shop_load(up, ["t1", "t2"], stop, seed=5, most_tables=2, keys=40, mixed=True)
            ),
            asyncio.create_task(_blobs(up, stop)),
        ]
        async with open_sink(f"{down.dsn()}?consistent=true", SinkOptions(cluster_id=91)) as sink:
            consumer = StorageConsumer(settings, sink)
            consuming = asyncio.create_task(consumer.run(done), name="storage-consumer")
            try:
                await asyncio.sleep(3)
                await up.execute("ALTER TABLE shop.t1 ADD COLUMN note VARCHAR(20)")
                await write_shop(
                    up,
                    [
                        "UPDATE kinds SET id = id + 1000, s = 'moved' WHERE id = 3",  # a key change
                        "UPDATE kinds SET d = d * 2, e = 'sent' WHERE id < 3",
                        "DELETE FROM kinds WHERE id = 8",
                        "UPDATE t1 SET note = 'after the alter' WHERE id < 10",
                    ],
                )
                await up.execute("CREATE TABLE shop.late (id INT PRIMARY KEY, v VARCHAR(8))")
                await write_shop(up, [f"INSERT INTO late VALUES ({i}, 'l{i}')" for i in range(5)])

                # the changefeed's checkpoint moves past the DDLs; then kill the capture while a
                # file (written because it reached file-size) holds rows above that checkpoint:
                # the restart writes them again
                after_ddl = await asyncio.to_thread(reader.checkpoint, store) or 0
                await wait_for(lambda: _checkpoint(port, after_ddl), 60, "the checkpoint moving")
                # the checkpoint may move between the look and the kill: what counts is the
                # one in etcd once the capture is dead, so kill again until a file is past it
                past: list[str] = []
                for _ in range(3):
                    looking = functools.partial(_rows_past, store, settings, port)
                    await wait_for(looking, 60, "a file past the checkpoint")
                    capture.kill()
                    capture.wait()
                    resumes_at = await _stored_checkpoint(etcd.endpoint)
                    before = await asyncio.to_thread(_all_files, store)
                    past = await asyncio.to_thread(_files_above, store, settings, resumes_at)
                    await asyncio.sleep(2)  # the upstream goes on meanwhile
                    capture, port = start_capture(etcd.endpoint, upstream, tmp_path / "c.log")
                    if past:
                        break
                await asyncio.sleep(8)
                stop.set()
                counts = [await t for t in loads]
                await write_shop(up, ["INSERT INTO late VALUES (99, 'last')"])
                await wait_for(lambda: shop_equal(up, down, 5), 120, "the rebuilt shop equal")
            finally:
                done.set()
                await consuming

        assert counts[0] > 50 and counts[1] > 50
        after = _all_files(store)
        for path, data in before.items():  # nothing seen before the kill was replaced
            if path not in ("metadata",) and not path.endswith("/CDC.index"):
                assert after[path] == data, path
        assert past and consumer.duplicates > 0  # rows written twice, dropped once
        _check_layout(store, settings)

        lake = tmp_path / "lake"
        await asyncio.to_thread(_run_lake_job, uri, lake, tmp_path / "spark.log")
        await _check_lake(up, lake)
    finally:
        stop.set()
        for t in loads:
            if not t.done():
                t.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        capture.kill()
        capture.wait()


def _check_layout(store: Store, settings: Any) -> None:
    meta = json.loads(store.read(PurePosixPath("metadata")) or b"")
    assert list(meta) == ["checkpoint-ts"] and meta["checkpoint-ts"] > 0
    scan = reader.scan(store, settings)
    ddls = sorted(s.definition.query for s in scan.schemas.values() if s.definition.query)
    assert "ALTER TABLE shop.t1 ADD COLUMN note VARCHAR(20)" in ddls
    assert any(q.startswith("CREATE TABLE shop.late") for q in ddls)
    assert (
        "shop",
        "",
        min(v for s, t, v in scan.schemas if s == "shop" and t == ""),
    ) in scan.schemas
    t1_versions = sorted(v for s, t, v in scan.schemas if t == "t1")
    assert len(t1_versions) >= 3  # the CREATE, its rows, the ALTER, the rows after it, ...
    for place, relative in scan.data:
        parts = relative.split("/")
        assert parts[3] == place.date and len(place.date) == 10  # <version>/<yyyy-mm-dd>/
        assert parts[4] == f"CDC{place.index:06d}.csv"
        index = store.read(PurePosixPath(relative).parent / "meta" / "CDC.index")
        assert index is not None and index.endswith(b".csv\n")
    for (schema, table, _), f in scan.schemas.items():
        if table:
            assert f.relative.startswith(f"{schema}/{table}/meta/schema_")


def _run_lake_job(uri: str, lake: Path, log: Path) -> None:
    with open(log, "ab") as out:
        code = subprocess.run(
            [
                sys.executable,
                "-m",
                "services.spark.storage_lake",
                "--storage",
                uri,
                "--lake",
                str(lake),
                "--master",
                "local[2]",
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
            check=False,
        ).returncode
    assert code == 0, log.read_text()[-3000:]


# kinds' columns the files hold as text (temporal values, SET) or as a number (BIT)
AS_TEXT = {"dt", "da", "ti", "ts", "st"}
AS_NUMBER = {"bi"}


def _plain(value: Any) -> Any:
    """Numbers as text (BIGINT UNSIGNED is a decimal in the lake), bytes as bytes."""
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return value


async def _check_lake(up: MariaDBServer, lake: Path) -> None:
    summary = json.loads((lake / "_storage_lake.json").read_text())
    assert set(summary["tables"]) == {f"shop.{t}" for t in ("kinds", "t1", "t2", "blobs", "late")}
    for name in summary["tables"]:
        table = pq.read_table(lake / name)
        columns = [c for c in table.column_names if not c.startswith("_")]
        got = sorted((tuple(_plain(r[c]) for c in columns) for r in table.to_pylist()), key=repr)
        select = ", ".join(
            f"CAST(`{c}` AS CHAR)" if c in AS_TEXT else f"`{c}` + 0" if c in AS_NUMBER else f"`{c}`"
            for c in columns
        )
        async with up.connect("shop") as conn, conn.cursor() as cur:
            await cur.execute("SET time_zone = '+00:00'")  # the capture reads TIMESTAMPs in UTC
            await cur.execute(f"SELECT {select} FROM {name}")
            rows = await cur.fetchall()
        want = sorted((tuple(_plain(v) for v in row) for row in rows), key=repr)
        assert len(got) == summary["tables"][name] and got == want, name


async def test_canal_json_files_without_date_directories_rebuilt_equal(
    tmp_path: Path, etcd: EtcdProcess, mariadb_instance: InstanceFactory
) -> None:
    """The same path with ``protocol=canal-json`` (TiDB extension on: each line a Canal
    FlatMessage with ``_tidb.commitTs``), ``date-separator=none``, TiCDC's default 20-digit file
    numbers and LF lines; the lake job reads the JSON files too."""
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    root = tmp_path / "cdc"
    uri = (
        f"file://{root}?protocol=canal-json&enable-tidb-extension=true&flush-interval=2s"
        "&date-separator=none&terminator=%0A"
    )
    settings = parse_url(urlsplit(uri))
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4422", tmp_path / "c.log")
    stop, done = asyncio.Event(), asyncio.Event()
    try:
        await capture_cli(port, "changefeed", "create", "-c", "to-json", "--sink-uri", uri)
        await up.execute("CREATE DATABASE shop")
        await up.execute(KINDS)
        await up.execute("CREATE TABLE shop.t1 (id INT PRIMARY KEY, v INT)")
        await write_shop(up, [f"INSERT INTO kinds VALUES {_kinds_row(i)}" for i in range(1, 6)])
        async with open_sink(f"{down.dsn()}?consistent=true", SinkOptions(cluster_id=92)) as sink:
            consumer = StorageConsumer(settings, sink)
            consuming = asyncio.create_task(consumer.run(done), name="storage-consumer")
            try:
                load = asyncio.create_task(
                    shop_load(up, ["t1"], stop, seed=9, most_tables=1, keys=30, mixed=True)
                )
                await asyncio.sleep(2)
                await up.execute("ALTER TABLE shop.t1 ADD COLUMN note VARCHAR(20)")
                await write_shop(
                    up,
                    [
                        "UPDATE kinds SET id = id + 1000, s = 'moved' WHERE id = 3",
                        "UPDATE kinds SET d = d * 2, e = 'sent', st = 'b' WHERE id < 3",
                        "DELETE FROM kinds WHERE id = 5",
                        "UPDATE t1 SET note = 'noted' WHERE id < 10",
                    ],
                )
                await asyncio.sleep(2)
                stop.set()
                assert await load > 20
                await wait_for(lambda: shop_equal(up, down, 2), 120, "the rebuilt shop equal")
            finally:
                done.set()
                await consuming
    finally:
        stop.set()
        capture.kill()
        capture.wait()
    scan = reader.scan(open_store(settings), settings)
    assert scan.data and all(len(rel.split("/")) == 4 for _, rel in scan.data)  # no date
    first = scan.data[0][1]
    assert first.endswith("/CDC00000000000000000001.json")
    line = (root / first).read_bytes().split(b"\n")[0]
    msg = json.loads(line)
    assert msg["database"] == "shop" and "commitTs" in msg["_tidb"] and not msg["isDdl"]
    lake = tmp_path / "lake"
    await asyncio.to_thread(_run_lake_job, uri, lake, tmp_path / "spark.log")
    table = pq.read_table(lake / "shop.t1").to_pylist()
    got = sorted((r["id"], r["v"], r["note"]) for r in table)
    want = sorted(tuple(r) for r in await up.query("SELECT id, v, note FROM shop.t1"))
    assert got == want
