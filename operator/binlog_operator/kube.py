"""A small Kubernetes API client for the objects the operator owns (aiohttp; no generated SDK).

kopf watches and patches BinlogClusters itself; this client does the rest: server-side apply of
the children (one field manager, forced, so the operator's intent always wins over stale
managers), reads, label-selected lists (pods too) and deletes of them, a merge patch with a
resourceVersion precondition (a rolling update's next partition), and the read-modify-write of a
status subresource of a BinlogCluster, Pump or Drainer (``get_status``/``patch_status`` with a
resourceVersion precondition; a lost race is ``KubeError.conflict``). Invariant: every failure
surfaces as ``KubeError`` whose ``retriable`` comes from the HTTP status (429, 5xx, connection
trouble), never from message text.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp

from binlog_operator import (
    DRAINER_KIND,
    DRAINER_PLURAL,
    GROUP,
    KIND,
    MANAGER,
    PLURAL,
    PUMP_KIND,
    PUMP_PLURAL,
    VERSION,
)
from tributary.errors import TributaryError

log = logging.getLogger(__name__)

_PLURALS = {
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Service"): "services",
    ("v1", "Secret"): "secrets",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("v1", "Pod"): "pods",
    ("apps/v1", "StatefulSet"): "statefulsets",
    (f"{GROUP}/{VERSION}", KIND): PLURAL,
    (f"{GROUP}/{VERSION}", PUMP_KIND): PUMP_PLURAL,
    (f"{GROUP}/{VERSION}", DRAINER_KIND): DRAINER_PLURAL,
}
API_VERSION = f"{GROUP}/{VERSION}"


class KubeError(TributaryError):
    """An API call failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message, retriable=status == 0 or status == 429 or status >= 500)
        self.status = status

    @property
    def conflict(self) -> bool:
        """The object changed since it was read (HTTP 409): read again and retry."""
        return self.status == 409


@dataclass(frozen=True)
class Credentials:
    server: str
    token: str | None = None
    ca_pem: str | None = None
    ca_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    insecure: bool = False

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if self.insecure:
            return False
        ctx = ssl.create_default_context(cafile=self.ca_path, cadata=self.ca_pem)
        if self.cert_path:
            ctx.load_cert_chain(self.cert_path, self.key_path)
        return ctx


def ca_pem(data: str | bytes | None) -> str | None:
    """Kubeconfig CA data is base64 of PEM; in-cluster readers may pass PEM already."""
    if data is None:
        return None
    text = data.decode() if isinstance(data, bytes) else data
    return text if "-----BEGIN" in text else base64.b64decode(text).decode()


def path(api_version: str, kind: str, namespace: str, name: str | None = None) -> str:
    plural = _PLURALS[(api_version, kind)]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    p = f"{base}/namespaces/{quote(namespace)}/{plural}"
    return p if name is None else f"{p}/{quote(name)}"


class KubeClient:
    def __init__(self, creds: Credentials, timeout: float = 30.0) -> None:
        self._creds = creds
        headers = {"Authorization": f"Bearer {creds.token}"} if creds.token else {}
        self._session = aiohttp.ClientSession(
            base_url=creds.server.rstrip("/"),
            headers=headers,
            connector=aiohttp.TCPConnector(ssl=creds.ssl_context()),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._session.close()

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply ``obj`` (create or update) as the operator's field manager."""
        md = obj["metadata"]
        url = path(obj["apiVersion"], obj["kind"], md["namespace"], md["name"])
        found = await self._call(
            "PATCH",
            url,
            params={"fieldManager": MANAGER, "force": "true"},
            data=json.dumps(obj),
            content_type="application/apply-patch+yaml",
        )
        assert found is not None
        return found

    async def get(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        """The object, or None if it does not exist."""
        return await self._call("GET", path(api_version, kind, namespace, name), missing_ok=True)

    async def list_labelled(
        self, api_version: str, kind: str, namespace: str, selector: str | None
    ) -> list[dict[str, Any]]:
        """The objects matching the label ``selector`` (``k=v,k2=v2``; None: all of them)."""
        params = {"labelSelector": selector} if selector else None
        found = await self._call("GET", path(api_version, kind, namespace), params=params)
        assert found is not None
        items: list[dict[str, Any]] = found.get("items") or []
        return items

    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        resource_version: str,
        changes: dict[str, Any],
    ) -> None:
        """Merge ``changes`` into the object if it is still at ``resource_version`` (KubeError
        with ``conflict`` if it moved on), as the operator's field manager."""
        body = {**changes, "metadata": {"resourceVersion": resource_version}}
        await self._call(
            "PATCH",
            path(api_version, kind, namespace, name),
            params={"fieldManager": MANAGER},
            data=json.dumps(body),
            content_type="application/merge-patch+json",
        )

    async def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        propagation: str = "Background",
    ) -> bool:
        """Delete (dependents in the background, or ``Orphan``: left, their owner reference
        removed); False if it was not there."""
        found = await self._call(
            "DELETE",
            path(api_version, kind, namespace, name),
            params={"propagationPolicy": propagation},
            missing_ok=True,
        )
        return found is not None

    async def get_status(
        self, namespace: str, name: str, kind: str = KIND
    ) -> dict[str, Any] | None:
        """A BinlogCluster (or Pump, Drainer) read through its status subresource (None if it
        is gone)."""
        url = path(API_VERSION, kind, namespace, name) + "/status"
        return await self._call("GET", url, missing_ok=True)

    async def patch_status(
        self,
        namespace: str,
        name: str,
        resource_version: str | None,
        status: dict[str, Any],
        kind: str = KIND,
    ) -> bool:
        """Merge ``status`` into the object's status, if it is still at ``resource_version``
        (KubeError with ``conflict`` if it moved on; None: whatever its version). False if the
        object is gone."""
        url = path(API_VERSION, kind, namespace, name) + "/status"
        body: dict[str, Any] = {"status": status}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        found = await self._call(
            "PATCH",
            url,
            data=json.dumps(body),
            content_type="application/merge-patch+json",
            missing_ok=resource_version is None,
        )
        return found is not None

    async def _call(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        data: str | None = None,
        content_type: str | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        headers = {"Content-Type": content_type} if content_type else {}
        if self._session.closed:  # a timer still running while the operator shuts down
            raise KubeError(f"{method} {url}: the client is closed")
        try:
            async with self._session.request(
                method, url, params=params, data=data, headers=headers
            ) as r:
                if r.status == 404 and missing_ok:
                    return None
                body = await r.text()
                if r.status >= 400:
                    raise KubeError(f"{method} {url}: {r.status} {body[:500]}", r.status)
                doc: dict[str, Any] = json.loads(body)
                return doc
        except (aiohttp.ClientError, TimeoutError) as e:
            raise KubeError(f"{method} {url}: {e!r}") from e
