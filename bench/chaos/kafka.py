"""The chaos harness's Kafka path (``--kafka``): drainer -> a real Kafka broker -> binlog-arbiter
-> the downstream MariaDB, with the broker and the arbiter as victims too.

The drainer writes tidb-binlog's secondary binlog with ``kafka-exactly-once=true`` (batch and
checkpoint in one Kafka transaction) to ``chaos_obinlog``; a ``binlog-arbiter`` process applies
it to the downstream, its checkpoint in the same downstream transaction as each batch, so the
harness's checkpoint probe and checker work unchanged. The broker runs from
``tests.support.kafka`` (the jars ``scripts/kafka-dist`` fetched), on its own data across kills.
Besides the checker (nothing lost downstream), ``duplicates`` reads the topic as a
``read_committed`` consumer and counts transactions seen more than once: exactly once means 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from services.demo.procs import Child
from tests.support.kafka import KafkaBroker, run_kafka
from tests.support.kafka_read import read_partition
from tests.support.mariadb import MariaDBServer
from tributary.sinks.kafka.secondary import decode_txn

TOPIC = "chaos_obinlog"
SINK_QUERY = "kafka-exactly-once=true&kafka-max-messages=64"


@dataclass
class KafkaSide:
    broker: KafkaBroker
    work: Path
    downstream: MariaDBServer
    arbiter: Child | None = None

    @property
    def sink_url(self) -> str:
        return f"kafka://{self.broker.bootstrap}/{TOPIC}?{SINK_QUERY}"

    def start_arbiter(self) -> Child:
        d = self.downstream
        config = self.work / "arbiter.toml"
        config.write_text(
            'addr = "127.0.0.1:0"\nlog-level = "info"\n'
            f'[up]\nkafka-addrs = "{self.broker.bootstrap}"\ntopic = "{TOPIC}"\n'
            "initial-commit-ts = 0\n"
            f'[down]\ndb-type = "mysql"\nhost = "{d.host}"\nport = {d.port}\n'
            f'user = "{d.user}"\npassword = "{d.password}"\n'
        )
        argv = [sys.executable, "-m", "services.arbiter", "--config", str(config)]
        self.arbiter = Child("arbiter", argv, self.work / "arbiter.log")
        return self.arbiter

    async def restart_broker(self) -> None:
        await asyncio.to_thread(self.broker.start)


@contextlib.asynccontextmanager
async def kafka_side(work: Path, downstream: MariaDBServer) -> AsyncIterator[KafkaSide]:
    """A broker (stopped on exit) and, once ``start_arbiter`` is called, the arbiter (killed on
    exit)."""
    with contextlib.ExitStack() as stack:
        broker = await asyncio.to_thread(stack.enter_context, run_kafka(work / "broker"))
        side = KafkaSide(broker, work, downstream)
        try:
            yield side
        finally:
            if side.arbiter is not None:
                side.arbiter.kill()


async def duplicates(side: KafkaSide) -> tuple[int, int]:
    """(transactions in the topic as a read_committed consumer sees it, how many of them were
    seen before: same commit ts)."""
    records = await read_partition(side.broker.bootstrap, TOPIC)
    seen = Counter(decode_txn(r.value).commit_ts for r in records if r.value is not None)
    return sum(seen.values()), sum(n - 1 for n in seen.values())
