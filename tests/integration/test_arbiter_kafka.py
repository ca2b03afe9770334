"""``binlog-arbiter`` on a real broker: a topic written by our ``kafka://`` sink applied to a real
MariaDB (SIGKILLed twice mid-run, restarted, nothing lost or applied twice) and to SQLite (a
malformed message stops it naming topic, partition and offset; ``skip-malformed`` goes on)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support.kafka_read import read_partition
from tests.support.waits import until
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.kafka.secondary import encode_txn
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from tests.support.kafka import KafkaBroker
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.kafka", "tests.support.mariadb"]
pytestmark = [pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
ACCOUNTS = TableInfo.build("bank", "accounts", [("id", "int"), ("balance", "bigint")], ["id"])
LOG = TableInfo.build("bank", "log", [("seq", "bigint"), ("note", "varchar(32)")])  # no key
N_ACCOUNTS = 10


def schema_txns() -> list[Txn]:
    return [
        Txn(100, ddl=Ddl("", "CREATE DATABASE bank")),
        Txn(101, ddl=Ddl("bank", "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT)")),
        Txn(102, ddl=Ddl("bank", "CREATE TABLE log (seq BIGINT, note VARCHAR(32))")),
        Txn(
            103,
            rows=tuple(
                RowChange.insert(ACCOUNTS, {"id": i, "balance": 1000}) for i in range(N_ACCOUNTS)
            ),
        ),
    ]


class Bank:
    """Transfers between accounts, each logged in a keyless table (a duplicate shows there)."""

    def __init__(self) -> None:
        self.balances = dict.fromkeys(range(N_ACCOUNTS), 1000)
        self.seq = 0
        self.ts = 1000

    def transfer(self) -> Txn:
        self.seq += 1
        self.ts += 10
        a, b = self.seq % N_ACCOUNTS, (self.seq * 7 + 3) % N_ACCOUNTS
        b = (a + 1) % N_ACCOUNTS if a == b else b
        rows = []
        for acct, delta in ((a, -self.seq % 50), (b, self.seq % 50)):
            old = self.balances[acct]
            self.balances[acct] = old + delta
            rows.append(
                RowChange.update(
                    ACCOUNTS,
                    {"id": acct, "balance": old},
                    {"id": acct, "balance": old + delta},
                )
            )
        rows.append(RowChange.insert(LOG, {"seq": self.seq, "note": f"t{self.seq}"}))
        return Txn(self.ts, self.ts - 1, rows=tuple(rows))


async def produce_raw(bootstrap: str, topic: str, *values: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for v in values:
            await producer.send_and_wait(topic, v, partition=0)
    finally:
        await producer.stop()


def write_config(path: Path, bootstrap: str, topic: str, down: str) -> Path:
    path.write_text(
        'addr = "127.0.0.1:0"\nlog-level = "info"\n'
        f'[up]\nkafka-addrs = "{bootstrap}"\nkafka-version = "0.8.2.0"\ntopic = "{topic}"\n'
        f"initial-commit-ts = 0\n[down]\n{down}\n"
    )
    return path


@contextmanager
def arbiter(config: Path, log: Path, *flags: str) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.arbiter", "--config", str(config), *flags],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def _logged_since(log: Path, offset: int, text: str) -> bool:
    return text.encode() in (await asyncio.to_thread(log.read_bytes))[offset:]


async def exited(proc: subprocess.Popen[bytes], within: float = 60) -> int:
    await until(lambda: asyncio.sleep(0, proc.poll() is not None), within)
    return proc.wait()


async def test_mariadb_sigkilled_twice_resumes_without_loss_or_duplicates(
    tmp_path: Path, kafka: KafkaBroker, mariadb_instance: InstanceFactory
) -> None:
    down = mariadb_instance("down")
    topic = "6000_obinlog"
    bank = Bank()
    total = 2000
    sink_url = f"kafka://{kafka.bootstrap}/{topic}"
    async with open_sink(sink_url, SinkOptions(cluster_id=6000)) as sink:
        await sink.apply(schema_txns())
        await sink.apply([bank.transfer() for _ in range(100)])

    produced = asyncio.Event()

    async def produce() -> None:  # keeps writing while the arbiter runs and dies
        async with open_sink(sink_url, SinkOptions(cluster_id=6000)) as sink:
            while bank.seq < total:
                await sink.apply([bank.transfer() for _ in range(20)])
                await asyncio.sleep(0.02)
        produced.set()

    async def logged() -> int:
        rows = await down.query(
            "SELECT COUNT(*) FROM information_schema.tables "
            "WHERE table_schema = 'bank' AND table_name = 'log'"
        )
        if not rows[0][0]:
            return 0
        return int((await down.query("SELECT COUNT(*) FROM bank.log"))[0][0])

    config = write_config(
        tmp_path / "arbiter.toml",
        kafka.bootstrap,
        topic,
        f'host = "127.0.0.1"\nport = {down.port}\nuser = "{down.user}"\n'
        f'password = "{down.password}"\nworker-count = 4\nbatch-size = 16',
    )
    log = tmp_path / "arbiter.log"
    writer = asyncio.create_task(produce(), name="test-producer")
    try:
        for _ in range(2):  # SIGKILL mid-run, twice
            target = await logged() + 150
            with arbiter(config, log) as proc:
                await until(lambda t=target: _at_least(logged, t), 120)  # type: ignore[misc]
                assert proc.poll() is None, log.read_text()[-3000:]
                proc.kill()
        started = log.stat().st_size
        with arbiter(config, log) as proc:
            await produced.wait()
            await until(lambda: _at_least(logged, total), 120)
            # the second run may have applied everything already: wait for this one to be up (its
            # signal handlers installed) before SIGTERM, or it dies of the signal while importing
            await until(lambda: _logged_since(log, started, "arbiter: topic"), 60)
            proc.terminate()
            assert await exited(proc) == 0, log.read_text()[-3000:]
    finally:
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)

    seqs = [r[0] for r in await down.query("SELECT seq FROM bank.log ORDER BY seq")]
    assert seqs == list(range(1, total + 1))  # every transaction once
    balances = dict(await down.query("SELECT id, balance FROM bank.accounts"))
    assert balances == bank.balances
    [(ts, status, offset)] = await down.query(
        "SELECT ts, status, kafka_offset FROM tidb_binlog.arbiter_checkpoint WHERE topic_name = %s",
        (topic,),
    )
    assert (ts, status) == (bank.ts, 0)
    assert offset == 4 + total  # the DDLs and the first insert, then one message per transfer
    text = log.read_text()
    assert text.count("from offset") == 3 and text.count("safe mode for 300 s") == 2


async def _at_least(count: object, n: int) -> bool:
    return await count() >= n  # type: ignore[operator, no-any-return]


async def test_malformed_message_stops_with_its_place_then_skip(
    tmp_path: Path, kafka: KafkaBroker
) -> None:
    topic = "arbiter-bad"
    bank = Bank()
    async with open_sink(f"kafka://{kafka.bootstrap}/{topic}", SinkOptions(cluster_id=1)) as sink:
        await sink.apply(schema_txns())
        await sink.apply([bank.transfer() for _ in range(5)])  # offsets 4..8
    repeated = encode_txn(Txn(bank.ts, bank.ts - 1, rows=()))  # none: a checkpoint-only txn
    assert repeated is None
    first = bank.transfer()
    again = encode_txn(first)
    assert again is not None
    # offset 9: a transfer, 10: the same one resent (skipped by ts), 11: garbage, 12..: more
    await produce_raw(kafka.bootstrap, topic, again, again, b"this is not a binlog")
    tail = [bank.transfer() for _ in range(3)]
    await produce_raw(kafka.bootstrap, topic, *(encode_txn(t) or b"" for t in tail))

    db = tmp_path / "down.db"
    config = write_config(
        tmp_path / "arbiter.toml", kafka.bootstrap, topic, f'db-type = "sqlite"\npath = "{db}"'
    )
    log = tmp_path / "arbiter.log"
    with arbiter(config, log) as proc:
        assert await exited(proc) == 1
    text = log.read_text()
    assert "malformed message in topic 'arbiter-bad' partition 0 at offset 11" in text, text
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM bank__log").fetchone()[0] == 6
        row = conn.execute("SELECT ts, status, kafka_offset FROM tidb_binlog__arbiter_checkpoint")
        assert row.fetchone() == (first.commit_ts, 1, 11)

    with arbiter(config, log, "--up-skip-malformed") as proc:
        await until(lambda: asyncio.sleep(0, _sqlite_count(db) == 9), 60)
        proc.terminate()
        assert await exited(proc) == 0
    assert "skipping malformed message in topic 'arbiter-bad' partition 0 at offset 11" in (
        log.read_text()
    )
    with sqlite3.connect(db) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM bank__log ORDER BY seq")]
        assert seqs == list(range(1, 10))
        balances = dict(conn.execute("SELECT id, balance FROM bank__accounts").fetchall())
        assert balances == bank.balances
        row = conn.execute("SELECT ts, status, kafka_offset FROM tidb_binlog__arbiter_checkpoint")
        assert row.fetchone() == (bank.ts, 0, 15)


def _sqlite_count(db: Path) -> bool | int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM bank__log").fetchone()[0])
    except sqlite3.Error:
        return 0


async def test_every_partition_merged_by_commit_ts(tmp_path: Path, kafka: KafkaBroker) -> None:
    """A drainer that partitions by key (3 partitions: a transfer's parts on several, each DDL on
    all) is applied whole transaction by whole transaction, nothing lost or twice, across a
    restart that finds each partition's place from the ts."""
    topic = "arbiter-keys"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 3, 1)])
    finally:
        await admin.close()
    bank = Bank()
    url = f"kafka://{kafka.bootstrap}/{topic}?kafka-partition-by=key"
    async with open_sink(url, SinkOptions(cluster_id=1)) as sink:
        await sink.apply(schema_txns())
        await sink.apply([bank.transfer() for _ in range(30)])
    counts = [len(await read_partition(kafka.bootstrap, topic, p)) for p in range(3)]
    assert min(counts) > 3 and sum(counts) > 3 * 3 + 30  # DDLs everywhere, transfers split

    db = tmp_path / "down.db"
    config = write_config(
        tmp_path / "arbiter.toml", kafka.bootstrap, topic, f'db-type = "sqlite"\npath = "{db}"'
    )
    log = tmp_path / "arbiter.log"

    async def applied(n: int) -> None:
        with arbiter(config, log) as proc:
            await until(lambda: asyncio.sleep(0, _sqlite_count(db) >= n or proc.poll()), 60)
            proc.terminate()
            assert await exited(proc) == 0, log.read_text()
        with sqlite3.connect(db) as conn:
            seqs = [r[0] for r in conn.execute("SELECT seq FROM bank__log ORDER BY seq")]
            assert seqs == list(range(1, n + 1))
            balances = dict(conn.execute("SELECT id, balance FROM bank__accounts").fetchall())
            assert balances == bank.balances
            row = conn.execute(
                "SELECT ts, status, kafka_offset FROM tidb_binlog__arbiter_checkpoint"
            )
            assert row.fetchone() == (bank.ts, 0, -1)

    await applied(30)
    async with open_sink(url, SinkOptions(cluster_id=1)) as sink:
        await sink.apply([bank.transfer() for _ in range(10)])
    await applied(40)
    assert "partition: offset" in log.read_text()
