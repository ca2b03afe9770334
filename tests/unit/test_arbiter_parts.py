"""The arbiter's pure parts: tidb-binlog's arbiter.toml loads, the downstream URL, the syncer's
batching against in-memory fakes (repeated commit ts dropped, the offset after each batch, a
malformed message stopping at its offset or skipped)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from services.arbiter.app import checkpoint_key
from services.arbiter.checkpoint import ArbiterCheckpoint
from services.arbiter.config import ArbiterConfig
from services.arbiter.errors import MalformedMessage
from services.arbiter.syncer import Record, Syncer
from tributary.change import RowChange, TableInfo, Txn
from tributary.settings import SettingsError, load
from tributary.sinks.kafka.secondary import encode_txn

STOCK = """\
# Arbiter Configuration.
# addr = "127.0.0.1:8251"

[up]
initial-commit-ts = 0
kafka-addrs = "127.0.0.1:9092"
kafka-version = "0.8.2.0"
topic = "6789_obinlog"

[down]
host = "localhost"
port = 3306
user = "root"
password = ""
# worker-count = 16
# batch-size = 64
# safe-mode = false
"""


def test_stock_arbiter_toml(tmp_path: Path) -> None:
    path = tmp_path / "arbiter.toml"
    path.write_text(STOCK)
    cfg = load(ArbiterConfig, ["--config", str(path)], {}, "ARBITER")
    assert cfg.addr == "127.0.0.1:8251" and cfg.up.brokers == ("127.0.0.1:9092",)
    assert (cfg.down.worker_count, cfg.down.batch_size) == (16, 64)
    assert cfg.down.sink_url() == "mysql://root@127.0.0.1:3306/?consistent=true"
    env = {"ARBITER_DOWN_PASSWORD": "p@ss", "ARBITER_DOWN_CONSISTENT": "false"}
    cfg = load(ArbiterConfig, ["--config", str(path)], env, "ARBITER")
    assert cfg.down.sink_url() == "mysql://root:p%40ss@127.0.0.1:3306/?consistent=false"


def test_topic_required_and_sqlite_path() -> None:
    with pytest.raises(SettingsError) as e:
        load(ArbiterConfig, ["--down-db-type", "sqlite"], {}, "ARBITER")
    assert "up.topic" in str(e.value) and "down.path" in str(e.value)
    cfg = load(ArbiterConfig, ["--up-topic", "t", "--down-url", "sqlite:///x.db"], {}, "ARBITER")
    assert cfg.down.sink_url() == "sqlite:///x.db"


def test_checkpoint_key_is_stable_and_positive() -> None:
    assert checkpoint_key("6789_obinlog") == checkpoint_key("6789_obinlog")
    assert 0 <= checkpoint_key("a") < 1 << 63 and checkpoint_key("a") != checkpoint_key("b")


T = TableInfo.build("db", "t", [("id", "bigint")], ["id"])


def msg(ts: int) -> bytes:
    value = encode_txn(Txn(ts, ts - 1, rows=(RowChange.insert(T, {"id": ts}),)))
    assert value is not None
    return value


class Topic:
    topic = "t"

    def __init__(self, values: Sequence[bytes | None]) -> None:
        self.records = [Record(i, v) for i, v in enumerate(values)]

    async def fetch(self, max_records: int, wait: float) -> list[Record]:
        out, self.records = self.records[:max_records], self.records[max_records:]
        return out


class Sink:
    safe_mode = False

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    async def apply(self, txns: Sequence[Txn]) -> None:
        self.batches.append([t.commit_ts for t in txns])

    async def checkpoint(self) -> int | None:
        return None

    async def close(self) -> None:
        return None


class Store:
    def __init__(self) -> None:
        self.saved: list[ArbiterCheckpoint] = []

    async def load(self) -> ArbiterCheckpoint | None:
        return None

    async def save(self, cp: ArbiterCheckpoint) -> None:
        self.saved.append(cp)

    async def close(self) -> None:
        return None


async def test_repeats_dropped_and_offset_after_the_batch() -> None:
    sink, store = Sink(), Store()
    topic = Topic([msg(50), msg(60), msg(60), msg(55), msg(70)])
    syncer = Syncer(topic, sink, store, last_ts=50, next_offset=0)
    assert await syncer.step() == 5
    assert sink.batches == [[60, 70]]
    assert store.saved == [ArbiterCheckpoint(70, 1, 5)]


async def test_malformed_stops_at_its_offset_or_is_skipped() -> None:
    sink, store = Sink(), Store()
    syncer = Syncer(Topic([msg(10), b"junk", msg(20)]), sink, store, last_ts=0, next_offset=0)
    with pytest.raises(MalformedMessage, match="topic 't' partition 0 at offset 1"):
        await syncer.step()
    assert sink.batches == [[10]] and store.saved == [ArbiterCheckpoint(10, 1, 1)]

    sink, store = Sink(), Store()
    syncer = Syncer(
        Topic([msg(10), None, msg(20)]), sink, store, last_ts=0, next_offset=0, skip_malformed=True
    )
    stop = asyncio.Event()
    assert await syncer.step() == 3
    stop.set()
    await syncer.run(stop)
    assert sink.batches == [[10, 20]] and store.saved == [ArbiterCheckpoint(20, 1, 3)]


class Recorded(Topic):
    """A topic that notes each fetch in ``events``; the sink notes each apply."""

    def __init__(self, values: Sequence[bytes | None], events: list[str]) -> None:
        super().__init__(values)
        self.events = events

    async def fetch(self, max_records: int, wait: float) -> list[Record]:
        self.events.append("fetch")
        return await super().fetch(max_records, wait)


class StoppingSink(Sink):
    """Notes each apply in ``events`` (yielding to the loop inside it, as a real one waits for
    its downstream) and sets ``stop`` once it applied ``stop_at``."""

    def __init__(self, events: list[str], stop: asyncio.Event, stop_at: int) -> None:
        super().__init__()
        self.events, self.stop, self.stop_at = events, stop, stop_at

    async def apply(self, txns: Sequence[Txn]) -> None:
        self.events.append("apply")
        await asyncio.sleep(0)
        await super().apply(txns)
        self.events.append("applied")
        if txns[-1].commit_ts >= self.stop_at:
            self.stop.set()


async def test_run_fetches_the_next_batch_while_one_is_applied() -> None:
    events: list[str] = []
    stop = asyncio.Event()
    values = [msg(ts) for ts in range(10, 10 + 1030)]  # batches of 512, 512, 6
    sink, store = StoppingSink(events, stop, 10 + 1029), Store()
    syncer = Syncer(Recorded(values, events), sink, store, last_ts=0, next_offset=0)
    await syncer.run(stop)
    assert events[:4] == ["fetch", "apply", "fetch", "applied"]
    assert [len(b) for b in sink.batches] == [512, 512, 6]
    assert [b[0] for b in sink.batches] == [10, 522, 1034]
    assert store.saved[-1] == ArbiterCheckpoint(1039, 1, 1030)


async def test_a_batch_fetched_ahead_is_dropped_at_a_stop() -> None:
    events: list[str] = []
    stop = asyncio.Event()
    values = [msg(ts) for ts in range(10, 10 + 600)]
    sink, store = StoppingSink(events, stop, 10), Store()  # stop after the first batch
    syncer = Syncer(Recorded(values, events), sink, store, last_ts=0, next_offset=0)
    await syncer.run(stop)
    assert events == ["fetch", "apply", "fetch", "applied"]
    assert sink.batches == [list(range(10, 10 + 512))]
    assert store.saved == [ArbiterCheckpoint(521, 1, 512)]  # the next start reads 512.. again
