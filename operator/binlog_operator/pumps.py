"""Reaching a pump's HTTP API from the operator: where it is (``PumpAddresses``) and closing it.

In a cluster a pump pod is ``<pod>.<cluster>-pump.<namespace>.svc``; tests and out-of-cluster
runs name each pod's ``host:port`` in a JSON file (``AddressFile``), read on every lookup so pumps
started after the operator are found. Invariant: ``HttpPumpCloser.close`` returns only when the
pump accepted the close (HTTP 200); every refusal is a ``ScaleDownError`` saying why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import aiohttp

from binlog_operator.configs import PUMP_HTTP_PORT
from binlog_operator.manifests import pump_name
from binlog_operator.scaledown import ScaleDownError

ADDRESS_FILE_ENV = "BINLOG_OPERATOR_PUMP_ADDRESS_FILE"


class PumpAddresses(Protocol):
    def http_url(self, namespace: str, cluster: str, pod: str) -> str:
        """Base URL of the pump HTTP API served by ``pod``."""


@dataclass(frozen=True)
class ClusterDns:
    """In-cluster: the pod's stable DNS name under the pump headless Service."""

    def http_url(self, namespace: str, cluster: str, pod: str) -> str:
        return f"http://{pod}.{pump_name(cluster)}.{namespace}.svc:{PUMP_HTTP_PORT}"


@dataclass(frozen=True)
class AddressFile:
    """A JSON object ``{"<namespace>/<pod>": "host:port"}``, read on each lookup."""

    path: Path

    def http_url(self, namespace: str, cluster: str, pod: str) -> str:
        try:
            table = json.loads(self.path.read_text())
        except (OSError, ValueError) as e:
            raise ScaleDownError(f"cannot read pump addresses from {self.path}: {e}") from e
        addr = table.get(f"{namespace}/{pod}")
        if not addr:
            raise ScaleDownError(f"no address for pump {namespace}/{pod} in {self.path}")
        return f"http://{addr}"


def addresses_from_env(env: Mapping[str, str] = os.environ) -> PumpAddresses:
    file = env.get(ADDRESS_FILE_ENV)
    return AddressFile(Path(file)) if file else ClusterDns()


class HttpPumpCloser:
    """``PUT /state/<pod>/close`` on the pump serving as ``pod`` (its node id is the pod name)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        addresses: PumpAddresses,
        namespace: str,
        cluster: str,
    ) -> None:
        self._session = session
        self._addresses = addresses
        self._namespace = namespace
        self._cluster = cluster

    async def close(self, pod: str) -> None:
        base = self._addresses.http_url(self._namespace, self._cluster, pod)
        url = f"{base}/state/{quote(pod)}/close"
        try:
            async with self._session.put(url, timeout=aiohttp.ClientTimeout(total=10)) as r:
                body = (await r.text())[:300]
                if r.status != 200:
                    raise ScaleDownError(f"pump {pod} refused to close: HTTP {r.status} {body}")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ScaleDownError(f"pump {pod} unreachable at {base}: {e!r}") from e
