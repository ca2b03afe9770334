"""Reaching a pump's or drainer's HTTP API from the operator: where it is (``PodAddresses``) and
closing it (``HttpCloser``), over HTTPS when the cluster has a TLS secret.

In a cluster a pod is ``<pod>.<service>.<namespace>.svc`` under its headless Service; tests and
out-of-cluster runs name each pod's ``host:port`` in a JSON file (``AddressFile``), read on every
lookup so nodes started after the operator are found. Invariant: ``HttpCloser.close`` returns
only when the node accepted the close (HTTP 200); every refusal is a ``ScaleDownError`` saying
why.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import aiohttp

from binlog_operator.scaledown import ScaleDownError

ADDRESS_FILE_ENV = "BINLOG_OPERATOR_PUMP_ADDRESS_FILE"


@dataclass(frozen=True)
class Target:
    """The nodes one closer reaches: pods under ``service`` serving HTTP(S) on ``port``."""

    namespace: str
    service: str
    port: int
    tls: ssl.SSLContext | None = None  # None: plain HTTP
    what: str = "pump"


class PodAddresses(Protocol):
    def address(self, namespace: str, service: str, pod: str, port: int) -> str:
        """``host:port`` of the HTTP API served by ``pod``."""


@dataclass(frozen=True)
class ClusterDns:
    """In-cluster: the pod's stable DNS name under its headless Service."""

    def address(self, namespace: str, service: str, pod: str, port: int) -> str:
        return f"{pod}.{service}.{namespace}.svc:{port}"


@dataclass(frozen=True)
class AddressFile:
    """A JSON object ``{"<namespace>/<pod>": "host:port"}``, read on each lookup."""

    path: Path

    def address(self, namespace: str, service: str, pod: str, port: int) -> str:
        try:
            table = json.loads(self.path.read_text())
        except (OSError, ValueError) as e:
            raise ScaleDownError(f"cannot read pod addresses from {self.path}: {e}") from e
        addr = table.get(f"{namespace}/{pod}")
        if not addr:
            raise ScaleDownError(f"no address for {namespace}/{pod} in {self.path}")
        return str(addr)


def addresses_from_env(env: Mapping[str, str] = os.environ) -> PodAddresses:
    file = env.get(ADDRESS_FILE_ENV)
    return AddressFile(Path(file)) if file else ClusterDns()


class HttpCloser:
    """``PUT /state/<pod>/close`` on the node serving as ``pod`` (its node id is the pod name)."""

    def __init__(
        self, session: aiohttp.ClientSession, addresses: PodAddresses, target: Target
    ) -> None:
        self._session = session
        self._addresses = addresses
        self._target = target

    def url(self, pod: str) -> str:
        t = self._target
        scheme = "https" if t.tls is not None else "http"
        base = f"{scheme}://{self._addresses.address(t.namespace, t.service, pod, t.port)}"
        return f"{base}/state/{quote(pod)}/close"

    async def close(self, pod: str) -> None:
        url, what = self.url(pod), self._target.what
        ssl_arg: ssl.SSLContext | bool = self._target.tls or True
        try:
            async with self._session.put(
                url, ssl=ssl_arg, timeout=aiohttp.ClientTimeout(total=10)
            ) as r:
                body = (await r.text())[:300]
                if r.status != 200:
                    raise ScaleDownError(f"{what} {pod} refused to close: HTTP {r.status} {body}")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ScaleDownError(f"{what} {pod} unreachable at {url}: {e!r}") from e
