"""TiCDC's claim check on file storage: a message too large for Kafka goes to a file.

``claim-check-storage-uri=file:///DIR``: each large message becomes ``DIR/<uuid4>.json`` holding
``{"key": BASE64, "value": BASE64}`` (TiCDC's ``ClaimCheckMessage``: the message's key and value
as Go's encoding/json writes byte slices), and the message sent to Kafka names the file by its
location ``file:///DIR/<uuid4>.json``. A file is written whole (temporary name, fsync, rename,
fsync of the directory) before its reference is sent, so a consumer never finds a reference to a
missing or partial file; a crash in between leaves at most an unreferenced file.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tributary.sinks.port import SinkError


class ClaimCheckError(SinkError):
    """The claim-check storage cannot be used, or a reference does not resolve."""


def _directory(uri: str) -> Path:
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not parts.path:
        raise ClaimCheckError(f"claim-check-storage-uri must be file:///DIR: {uri!r}")
    return Path(unquote(parts.path))


class ClaimCheck:
    def __init__(self, uri: str) -> None:
        self.directory = _directory(uri)
        self.uri = "file://" + str(self.directory).rstrip("/")

    async def start(self) -> None:
        try:
            await asyncio.to_thread(self.directory.mkdir, parents=True, exist_ok=True)
        except OSError as e:
            raise ClaimCheckError(f"claim-check storage {self.uri}: {e}") from e

    async def write(self, key: bytes | None, value: bytes) -> str:
        """Stores one message; returns its location (what the Kafka message carries). A message
        without a key (canal-json's) has ``"key":null``, as Go writes a nil byte slice."""
        name = f"{uuid.uuid4()}.json"
        body = json.dumps(
            {
                "key": None if key is None else base64.b64encode(key).decode(),
                "value": base64.b64encode(value).decode(),
            },
            separators=(",", ":"),
        ).encode()
        try:
            await asyncio.to_thread(self._write, name, body)
        except OSError as e:
            raise ClaimCheckError(
                f"claim-check storage {self.uri}: cannot write {name}: {e}", retriable=True
            ) from e
        return f"{self.uri}/{name}"

    def _write(self, name: str, body: bytes) -> None:
        tmp = self.directory / f".{name}.tmp"
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / name)
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read(location: str) -> tuple[bytes, bytes]:
    """The (key, value) of the message a claim-check location names (for consumers)."""
    path = _directory(location)
    try:
        doc = json.loads(path.read_bytes())
        return base64.b64decode(doc["key"] or ""), base64.b64decode(doc["value"] or "")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ClaimCheckError(f"claim check {location}: {e}") from e
