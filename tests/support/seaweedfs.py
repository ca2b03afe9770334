"""A real S3-compatible server on loopback: SeaweedFS's ``weed server -s3`` (master, volume
server, filer and S3 gateway in one process), built by ``make deps`` (component ``seaweedfs``).

Every port is a free one on 127.0.0.1 (none of SeaweedFS's fixed defaults is left listening:
the Iceberg and Lance ports are off), data under the test's directory, telemetry off. The S3
gateway takes one identity (``ACCESS_KEY``/``SECRET_KEY``) from an ``-s3.config`` file, so every
request is signed and checked as on AWS. ``client()`` is a botocore client for it; ``uri()`` a
storage sink URL with TiCDC's S3 parameters.

As a pytest plugin (``pytest_plugins = ["tests.support.seaweedfs"]``) this module gives the
``seaweedfs`` fixture: a fresh server for one test, with the bucket ``cdc``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.support.components import component
from tests.support.net import free_port
from tests.support.procs import stop_process

ACCESS_KEY = "tributary"
SECRET_KEY = "tributary-secret-key"
BUCKET = "cdc"


@dataclass
class SeaweedFS:
    root: Path
    s3_port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def log(self) -> Path:
        return self.root / "weed.log"

    def client(self) -> Any:
        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard"}),
        )

    def uri(self, prefix: str, query: str, bucket: str = BUCKET) -> str:
        """``s3://bucket/prefix?<query>&endpoint=...&access-key=...`` for the storage sink."""
        return (
            f"s3://{bucket}/{prefix}?{query}&endpoint={self.endpoint}&region=us-east-1"
            f"&access-key={ACCESS_KEY}&secret-access-key={SECRET_KEY}"
        )

    def start(self, timeout: float = 90.0) -> None:
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "tributary",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        ports = {
            name: free_port()
            for name in (
                "master.port",
                "master.port.grpc",
                "volume.port",
                "volume.port.grpc",
                "filer.port",
                "filer.port.grpc",
                "s3.port.grpc",
            )
        }
        argv = [
            str(component("seaweedfs")),
            "server",
            f"-dir={self.root / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *(f"-{name}={port}" for name, port in ports.items()),
            "-s3",
            f"-s3.port={self.s3_port}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            "-volume.max=16",
        ]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        """Until the bucket can be created and an object written to it (the volume server has
        joined the master: a PUT before that fails)."""
        assert self.proc is not None
        client = self.client()
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self.proc.returncode}: {self._tail()}")
            try:
                try:
                    client.create_bucket(Bucket=BUCKET)
                except ClientError as e:
                    if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou",):
                        raise
                client.put_object(Bucket=BUCKET, Key=".ready", Body=b"ready")
                client.delete_object(Bucket=BUCKET, Key=".ready")
                return
            except (BotoCoreError, ClientError) as e:
                last = e
                time.sleep(0.3)
        raise TimeoutError(f"seaweedfs not ready in {timeout}s ({last}): {self._tail()}")

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)


@contextmanager
def run_seaweedfs(root: Path) -> Iterator[SeaweedFS]:
    """A started server under ``root`` with the bucket ``cdc``; stopped on exit."""
    root.mkdir(parents=True, exist_ok=True)
    server = SeaweedFS(root, free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def seaweedfs(tmp_path: Path) -> Iterator[SeaweedFS]:
    """A fresh, real S3-compatible server for one test."""
    with run_seaweedfs(tmp_path / "seaweedfs") as server:
        yield server
