"""A real Apache Kafka broker (KRaft, one node acting as controller and broker) on loopback.

The jars come from ``make deps`` (scripts/kafka-dist fetches them from Maven Central with the
installed Maven into ``~/.cache/tributary/kafka``); the broker runs on the installed Java 17.
Storage is formatted with a fresh cluster id under the test's directory, so a restart (``kill``
then ``start``) keeps the topics and their messages, as a real broker's restart does.

As a pytest plugin (``pytest_plugins = ["tests.support.kafka"]``) this module gives the ``kafka``
fixture (a fresh broker for one test) and ``kafka_factory`` (brokers with extra properties).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.components import component
from tests.support.net import free_port
from tests.support.procs import stop_process

REPO = Path(__file__).resolve().parents[2]
READY_LINE = "Kafka Server started"

_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = info
"""


def jars() -> Path:
    """The directory holding the broker's jars (``make deps`` fetches them), or fail at once."""
    return component("kafka")


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("java is not installed (the Kafka broker needs Java 17)")
    return found


def _cluster_id() -> str:
    # Kafka's format: a UUID in url-safe base64 without padding; never starting with '-'.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if cid[0] != "-":
            return cid


@dataclass
class KafkaBroker:
    """One broker process; ``kill``/``start`` restart it on the same ports and data."""

    root: Path
    libs: Path
    port: int
    controller_port: int
    overrides: Mapping[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"
    sasl_users: Mapping[str, str] = field(default_factory=dict)  # SASL/PLAIN users: passwords
    sasl_port: int = 0  # the SASL_PLAINTEXT listener's port, when there are SASL users
    tls: Path | None = None  # a directory with ca.crt, tls.crt, tls.key: an SSL listener too
    tls_port: int = 0  # that listener's port (mutual TLS: clients chain to ca.crt)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_port}"

    @property
    def tls_bootstrap(self) -> str:
        return f"{self.host}:{self.tls_port}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def properties(self) -> Path:
        return self.root / "server.properties"

    def write_config(self) -> None:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": (
                f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:"
                f"{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "log.dirs": str(self.root / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            **self._sasl(),
            **self._tls(),
            **self.overrides,
        }
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.root / "log4j2.properties").write_text(_LOG4J.format(log=self.log))

    def _sasl(self) -> dict[str, str]:
        """A SASL_PLAINTEXT listener with PLAIN users beside the plaintext one, if asked for."""
        if not self.sasl_users:
            return {}
        users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
        plain = f"{self.host}:{self.port}"
        return {
            "listeners": f"PLAINTEXT://{plain},CONTROLLER://{self.host}:{self.controller_port},"
            f"SASL://{self.sasl_bootstrap}",
            "advertised.listeners": f"PLAINTEXT://{plain},SASL://{self.sasl_bootstrap}",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL:SASL_PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            ),
        }

    def _tls(self) -> dict[str, str]:
        """An SSL listener beside the plaintext one, requiring a client certificate, with the
        PEM files copied from ``tls`` as they are now (``write_config`` again and restart to
        take an update: the broker reads them at start)."""
        if self.tls is None:
            return {}
        keystore, truststore = self.root / "keystore.pem", self.root / "truststore.pem"
        keystore.write_bytes(
            (self.tls / "tls.key").read_bytes() + (self.tls / "tls.crt").read_bytes()
        )
        truststore.write_bytes((self.tls / "ca.crt").read_bytes())
        plain, tls = f"{self.host}:{self.port}", self.tls_bootstrap
        return {
            "listeners": f"PLAINTEXT://{plain},CONTROLLER://{self.host}:{self.controller_port},"
            f"SSL://{tls}",
            "advertised.listeners": f"PLAINTEXT://{plain},SSL://{tls}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore),
            "ssl.client.auth": "required",
        }

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            java(),
            "-Xms128m",
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # quicker start on a busy machine; tests need no peak speed
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            f"{self.libs}/*",
            main,
            *args,
        ]

    def format(self) -> None:
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={_cluster_id()}",
                "-c",
                str(self.properties),
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self, timeout: float = 90.0) -> None:
        """Start the broker (on its existing data) and wait until it serves."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        offset = self.log.stat().st_size if self.log.exists() else 0
        out = open(self.root / "stdout.log", "ab")
        self.proc = subprocess.Popen(
            self._java("kafka.Kafka", str(self.properties)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        self._wait_ready(offset, timeout)

    def _wait_ready(self, offset: int, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka exited with {self.proc.returncode}: {self._tail()}")
            if self.log.exists() and READY_LINE in self.log.read_text()[offset:]:
                try:
                    with socket.create_connection((self.host, self.port), timeout=0.5):
                        return
                except OSError:
                    pass
            time.sleep(0.1)
        raise TimeoutError(f"kafka not ready in {timeout}s: {self._tail()}")

    def _tail(self) -> str:
        parts = [p.read_text()[-3000:] for p in (self.log, self.root / "stdout.log") if p.exists()]
        return "\n".join(parts)

    def kill(self) -> None:
        """SIGKILL the broker (its data stays on disk)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL if it does not end in time."""
        if self.proc is not None:
            stop_process(self.proc, timeout, self.kill)

    def restart(self) -> None:
        self.kill()
        self.start()


@contextmanager
def run_kafka(
    root: Path,
    overrides: Mapping[str, str] | None = None,
    sasl_users: Mapping[str, str] | None = None,
    tls: Path | None = None,
) -> Iterator[KafkaBroker]:
    """A formatted, started broker under ``root``; stopped (and waited for) on exit."""
    assert not (sasl_users and tls), "one extra listener at a time"
    root.mkdir(parents=True, exist_ok=True)
    broker = KafkaBroker(root, jars(), free_port(), free_port(), dict(overrides or {}))
    if sasl_users:
        broker.sasl_users, broker.sasl_port = dict(sasl_users), free_port()
    if tls is not None:
        broker.tls, broker.tls_port = tls, free_port()
    broker.write_config()
    broker.format()
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[KafkaBroker]:
    """A fresh, real broker for one test."""
    with run_kafka(tmp_path / "kafka") as broker:
        yield broker


@pytest.fixture
def kafka_factory(tmp_path: Path) -> Iterator[Callable[..., KafkaBroker]]:
    """``kafka_factory(**properties)`` starts a broker with server.properties overrides;
    ``sasl_users={"user": "password"}`` adds a SASL/PLAIN listener (``sasl_bootstrap``),
    ``tls=directory`` a mutual-TLS listener (``tls_bootstrap``) from that directory's files."""
    with ExitStack() as stack:
        count = iter(range(1000))

        def start(
            sasl_users: Mapping[str, str] | None = None, tls: Path | None = None, **properties: str
        ) -> KafkaBroker:
            props = {k.replace("_", "."): v for k, v in properties.items()}
            root = tmp_path / f"kafka-{next(count)}"
            return stack.enter_context(run_kafka(root, props, sasl_users, tls))

        yield start
