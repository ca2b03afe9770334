"""Keeping the capture cluster's changefeeds as ``captures.changefeeds`` declares them, through
the captures' HTTP API (``/api/v2/changefeeds``).

One pass (``FeedSync.sync``, run by the status timer): read each declared changefeed's SASL
Secret and build its sink URL (``feedspec.sink_uri``), read the changefeeds the capture cluster
holds from etcd (the full sink URLs, to compare), plan (``feedspec.plan``) and apply each step
through any capture that answers (every capture serves every route). Invariant: a failed step
is reported for its changefeed and leaves the ``managed`` record as it was, so the next pass
tries again; one changefeed's failure never stops the others'.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from binlog_operator.changefeeds import read_actual
from binlog_operator.configs import CAPTURE_CLUSTER_ID, CAPTURE_PORT
from binlog_operator.feedspec import Action, FeedSpec, plan, sink_uri, still_managed
from binlog_operator.kube import KubeClient, KubeError
from binlog_operator.pumps import PodAddresses
from binlog_operator.reconcile import OpenKv
from binlog_operator.scaledown import ScaleDownError
from binlog_operator.spec import ClusterSpec
from binlog_operator.tlsctx import context_for
from tributary.cdc.keys import DEFAULT_NAMESPACE

log = logging.getLogger(__name__)


class FeedError(Exception):
    """A step that could not be done now; the message says why."""


@dataclass(frozen=True)
class SyncOutcome:
    managed: dict[str, str]  # {id: config hash} the operator applied
    errors: dict[str, str]  # {id: why its last step failed}


class CaptureApi:
    """The changefeed routes of whichever capture pod answers first."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        bases: list[str],
        tls: ssl.SSLContext | None,
    ) -> None:
        self._session = session
        self._bases = bases
        self._tls = tls

    async def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> None:
        if not self._bases:
            raise FeedError("no capture runs (captures.replicas is 0)")
        unreachable: list[str] = []
        for base in self._bases:
            url = f"{base}{path}"
            try:
                async with self._session.request(
                    method,
                    url,
                    json=body,
                    ssl=self._tls or True,
                    timeout=aiohttp.ClientTimeout(total=15),
                ) as r:
                    if r.status == 200:
                        return
                    text = (await r.text())[:500]
                    raise FeedError(f"{method} {path}: HTTP {r.status} {_message(text)}")
            except (aiohttp.ClientError, TimeoutError) as e:
                unreachable.append(f"{base}: {e!r}")
        raise FeedError(f"no capture answered: {'; '.join(unreachable)[:500]}")


def _message(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if isinstance(body, dict) and "error_msg" in body:
        return f"{body.get('error_code', '')}: {body['error_msg']}"
    return text


class FeedSync:
    def __init__(
        self,
        kube: KubeClient,
        session: aiohttp.ClientSession,
        addresses: PodAddresses,
        open_kv: OpenKv,
        etcd_timeout: float,
    ) -> None:
        self._kube = kube
        self._session = session
        self._addresses = addresses
        self._open_kv = open_kv
        self._etcd_timeout = etcd_timeout

    async def sync(
        self, name: str, namespace: str, spec: ClusterSpec, managed: Mapping[str, str]
    ) -> SyncOutcome:
        """One pass; raises KvError/OSError/TimeoutError when etcd cannot be read (nothing is
        done then)."""
        feeds = spec.captures.changefeeds
        if not feeds and not managed:
            return SyncOutcome({}, {})
        errors: dict[str, str] = {}
        wanted: dict[str, tuple[FeedSpec, str]] = {}
        objects: dict[str, Mapping[str, Any] | None] = {}  # Secrets and claims read this pass
        for feed in feeds:
            try:
                wanted[feed.id] = (feed, await self._uri(namespace, feed, objects))
            except FeedError as e:
                errors[feed.id] = str(e)
        async with asyncio.timeout(self._etcd_timeout), self._open_kv(spec.etcd_endpoints) as kv:
            actual = await read_actual(kv, CAPTURE_CLUSTER_ID)
        # a declared changefeed whose URL cannot be built now is neither touched nor removed
        keep = {
            f.id: (f, actual[f.id].sink_uri) for f in feeds if f.id in errors and f.id in actual
        }
        steps = plan({**wanted, **keep}, actual, managed)
        if not steps:
            return SyncOutcome(still_managed(wanted, actual, managed, {}, set()), errors)
        api = await self._api(name, namespace, spec)
        applied: dict[str, str] = {}
        removed: set[str] = set()
        for step in steps:
            try:
                await _apply(api, step)
            except FeedError as e:
                log.warning(
                    "%s/%s: changefeed %s: %s failed: %s", namespace, name, step.id, step.kind, e
                )
                errors[step.id] = f"{step.kind} failed: {e}"
                continue
            log.info("%s/%s: changefeed %s: %s", namespace, name, step.id, step.kind)
            if step.kind == "remove":
                removed.add(step.id)
            elif step.feed is not None:
                applied[step.id] = step.feed.config_hash
        return SyncOutcome(still_managed(wanted, actual, managed, applied, removed), errors)

    async def _uri(
        self, namespace: str, feed: FeedSpec, cache: dict[str, Mapping[str, Any] | None]
    ) -> str:
        if feed.kafka is not None and feed.kafka.claim_check_claim:
            await self._claim_exists(namespace, feed.kafka.claim_check_claim, cache)
        if feed.storage_claim:
            await self._claim_exists(namespace, feed.storage_claim, cache, "storageVolumeClaim")
        sasl = feed.kafka.sasl if feed.kafka is not None else None
        if sasl is None:
            return sink_uri(feed)
        if sasl.secret not in cache:
            try:
                cache[sasl.secret] = await self._kube.get("v1", "Secret", namespace, sasl.secret)
            except KubeError as e:
                raise FeedError(f"cannot read Secret {sasl.secret}: {e}") from e
        found = cache[sasl.secret]
        if found is None:
            raise FeedError(f"Secret {namespace}/{sasl.secret} does not exist")
        data = found.get("data") or {}
        values = []
        for key in (sasl.user_key, sasl.password_key):
            if key not in data:
                raise FeedError(f"Secret {namespace}/{sasl.secret} has no key {key!r}")
            try:
                values.append(base64.b64decode(data[key], validate=True).decode())
            except (binascii.Error, UnicodeDecodeError) as e:
                raise FeedError(f"Secret {namespace}/{sasl.secret} key {key!r}: {e}") from e
        return sink_uri(feed, (values[0], values[1]))

    async def _claim_exists(
        self,
        namespace: str,
        claim: str,
        cache: dict[str, Mapping[str, Any] | None],
        field: str = "claimCheckVolumeClaim",
    ) -> None:
        """FeedError unless a PersistentVolumeClaim the changefeed names (``field``) exists:
        without it every capture pod stays Pending, and the changefeed's error should say why."""
        key = f"pvc/{claim}"
        if key not in cache:
            try:
                cache[key] = await self._kube.get("v1", "PersistentVolumeClaim", namespace, claim)
            except KubeError as e:
                raise FeedError(f"cannot read PersistentVolumeClaim {claim}: {e}") from e
        if cache[key] is None:
            raise FeedError(
                f"PersistentVolumeClaim {namespace}/{claim} ({field}) does not "
                "exist: the capture pods mount it and stay Pending until it is created"
            )

    async def _api(self, name: str, namespace: str, spec: ClusterSpec) -> CaptureApi:
        tls = None
        if spec.tls_secret:
            try:
                tls = await context_for(self._kube, namespace, spec.tls_secret)
            except ScaleDownError as e:
                raise FeedError(str(e)) from e
        scheme = "https" if tls is not None else "http"
        service = f"{name}-capture"
        bases = []
        for i in range(spec.captures.replicas):
            try:
                addr = self._addresses.address(namespace, service, f"{service}-{i}", CAPTURE_PORT)
            except ScaleDownError:
                continue  # not known (yet): another capture may answer
            bases.append(f"{scheme}://{addr}")
        return CaptureApi(self._session, bases, tls)


async def _apply(api: CaptureApi, step: Action) -> None:
    path = f"/api/v2/changefeeds/{step.id}"
    if step.kind == "remove":
        await api.call("DELETE", path)
        return
    feed = step.feed
    assert feed is not None
    if step.kind == "create":
        body: dict[str, Any] = {"changefeed_id": step.id, "sink_uri": step.sink_uri}
        if feed.start_ts:
            body["start_ts"] = feed.start_ts
        if feed.config:
            body["replica_config"] = dict(feed.config)
        await api.call("POST", "/api/v2/changefeeds", body)
        return
    if step.pause:
        await api.call("POST", f"{path}/pause")
    await api.call("PUT", path, {"sink_uri": step.sink_uri, "replica_config": dict(feed.config)})
    if step.resume:
        await api.call("POST", f"{path}/resume")


def with_errors(
    entries: list[dict[str, Any]], declared: list[str], errors: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The status entries with each declared changefeed's failure in ``error``, and a
    ``pending`` entry for a declared one the capture cluster does not have yet."""
    shown = {e["id"] for e in entries if e.get("namespace") == DEFAULT_NAMESPACE}
    out = [
        {**e, "error": errors[e["id"]]}
        if e.get("namespace") == DEFAULT_NAMESPACE and e["id"] in errors
        else e
        for e in entries
    ]
    for feed_id in declared:
        if feed_id not in shown:
            entry = {"id": feed_id, "namespace": DEFAULT_NAMESPACE, "state": "pending"}
            if feed_id in errors:
                entry["error"] = errors[feed_id]
            out.append(entry)
    return out
