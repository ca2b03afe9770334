"""A real Kafka Connect standalone worker running Debezium's JDBC sink connector, on loopback.

The jars come from ``make deps`` (scripts/kafka-connect-dist fetches connect-runtime and the
connector with Maven into ``~/.cache/tributary/kafka-connect``): ``worker/`` is the worker's
classpath, ``plugins/`` its plugin.path. The worker runs ``ConnectStandalone`` on the installed
Java 17 with the JSON converter (schemas enabled, as the debezium protocol writes them), its
offsets in a file under the test's directory, its REST API on a free port and its log in
``connect.log``.

``JdbcSinkWorker.caught_up`` waits, with a bound, until the connector's consumer group has
committed the end offset of every partition of every topic it reads: everything up to then is
in the database (the sink task writes in ``put``, and Connect commits offsets only after it).
A task that fails ends the wait at once with its stack trace and the end of the log.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from tests.support.components import component
from tests.support.net import free_port
from tests.support.procs import stop_process

CONNECTOR = "io.debezium.connector.jdbc.JdbcSinkConnector"
_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.connect.name = org.apache.kafka.connect.runtime.WorkerSinkTask
logger.connect.level = info
logger.dbz.name = io.debezium.connector.jdbc
logger.dbz.level = info
"""


def dist() -> Path:
    """The cache directory holding ``worker/`` and ``plugins/`` (``make deps`` fetches it)."""
    return component("kafka-connect")


@dataclass
class JdbcSinkWorker:
    """One ``ConnectStandalone`` process with one JDBC sink connector named ``name``."""

    root: Path
    bootstrap: str
    connector: Mapping[str, str]  # the connector's properties besides name and class
    name: str = "dbz-jdbc"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.root / "connect.log"

    @property
    def group(self) -> str:
        return f"connect-{self.name}"

    def write_config(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        worker = {
            "bootstrap.servers": self.bootstrap,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            # a null stays null: by default the converter puts the field's default in its place
            "value.converter.replace.null.with.default": "false",
            "offset.storage.file.filename": str(self.root / "offsets"),
            "offset.flush.interval.ms": "500",
            "plugin.path": str(dist() / "plugins"),
            "plugin.discovery": "only_scan",
            "listeners": f"http://127.0.0.1:{self.port}",
            "consumer.auto.offset.reset": "earliest",
            "consumer.max.poll.records": "500",
            "consumer.metadata.max.age.ms": "1000",  # topics made mid-run are read at once
        }
        connector = {
            "name": self.name,
            "connector.class": CONNECTOR,
            "tasks.max": "1",
            **self.connector,
        }
        _write(self.root / "worker.properties", worker)
        _write(self.root / "connector.properties", connector)
        (self.root / "log4j2.properties").write_text(_LOG4J.format(log=self.log))

    def start(self, timeout: float = 120.0) -> None:
        """Start the worker and wait until its connector's task runs (or failed: raised)."""
        from tests.support.kafka import java  # here: test modules register it as a pytest plugin

        self.write_config()
        out = open(self.root / "stdout.log", "ab")
        self.proc = subprocess.Popen(
            [
                java(), "-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
                "-cp", f"{dist() / 'worker'}/*",
                "org.apache.kafka.connect.cli.ConnectStandalone",
                str(self.root / "worker.properties"), str(self.root / "connector.properties"),
            ],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            tasks = (self.status() or {}).get("tasks") or []
            if tasks and tasks[0].get("state") == "RUNNING":
                return
            self._check_tasks(tasks)
            time.sleep(0.25)
        raise TimeoutError(f"the JDBC sink task did not start in {timeout:g} s: {self.tail()}")

    def status(self) -> dict[str, Any] | None:
        """The connector's status from the REST API; None while the API does not answer."""
        url = f"http://127.0.0.1:{self.port}/connectors/{self.name}/status"
        try:
            with urlopen(url, timeout=2) as r:
                data: dict[str, Any] = json.loads(r.read())
                return data
        except (URLError, OSError, ValueError):
            return None

    def _check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            code = self.proc.returncode
            raise RuntimeError(f"the Connect worker exited with {code}: {self.tail()}")

    def _check_tasks(self, tasks: list[dict[str, Any]]) -> None:
        failed = [t for t in tasks if t.get("state") == "FAILED"]
        if failed:
            raise RuntimeError(f"the JDBC sink task failed: {failed[0].get('trace', '')[:4000]}")

    async def caught_up(self, topics: str, within: float = 120.0) -> dict[TopicPartition, int]:
        """Wait up to ``within`` s until the connector committed the end of every partition of
        the topics matching the regex ``topics``; returns those end offsets."""
        pattern = re.compile(topics)
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap)
        await admin.start()
        await consumer.start()
        last: object = "nothing read yet"
        try:
            async with asyncio.timeout(within):
                while True:
                    self._check_alive()
                    self._check_tasks((await asyncio.to_thread(self.status) or {}).get("tasks", []))
                    names = [t for t in await admin.list_topics() if pattern.fullmatch(t)]
                    parts = [
                        TopicPartition(t, p)
                        for t in names
                        for p in consumer.partitions_for_topic(t) or await _partitions(consumer, t)
                    ]
                    ends = await consumer.end_offsets(parts) if parts else {}
                    try:
                        done = await admin.list_consumer_group_offsets(self.group)
                    except KafkaError as e:  # the group's coordinator is still being elected
                        last = e
                        await asyncio.sleep(0.5)
                        continue
                    behind = {
                        tp: (done[tp].offset if tp in done else None, end)
                        for tp, end in ends.items()
                        if end and (tp not in done or done[tp].offset < end)
                    }
                    if names and not behind:
                        return ends
                    last = behind or "no topic yet"
                    await asyncio.sleep(0.5)
        except TimeoutError:
            raise AssertionError(
                f"the JDBC sink did not catch up in {within:g} s (committed, end): {last}\n"
                f"{self.tail()}"
            ) from None
        finally:
            await consumer.stop()
            await admin.close()

    def tail(self, chars: int = 4000) -> str:
        logs = (self.log, self.root / "stdout.log")
        parts = [p.read_text(errors="replace")[-chars:] for p in logs if p.exists()]
        return "\n".join(parts) if any(parts) else "(no log)"

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    await consumer._client.force_metadata_update()  # a topic created since the last refresh
    return consumer.partitions_for_topic(topic) or set()


def _write(path: Path, props: Mapping[str, str]) -> None:
    path.write_text("".join(f"{k}={_escape(v)}\n" for k, v in props.items()))


def _escape(value: str) -> str:
    """A Java properties value: backslashes and leading spaces escaped."""
    return value.replace("\\", "\\\\").lstrip(" ")


@contextmanager
def run_jdbc_sink(
    root: Path, bootstrap: str, connector: Mapping[str, str], *, name: str = "dbz-jdbc"
) -> Iterator[JdbcSinkWorker]:
    """A started worker with its connector's task running; stopped (and waited for) on exit."""
    worker = JdbcSinkWorker(root, bootstrap, dict(connector), name)
    try:
        worker.start()
        yield worker
    finally:
        worker.stop()
