"""The pumps' auto pilot at work: one look at a cluster reads its pump StatefulSet, scrapes each
pump's ``/metrics`` (``binlog_pump_binlogs_written``) and, with ``spec.pumps.autoscale``, asks
``autoscale.Pilot`` for a count, which it writes to ``spec.pumps.replicas``.

Invariants: the pilot never touches the StatefulSet: it writes ``spec.pumps.replicas`` (with
the resourceVersion it decided on as a precondition, so a concurrent ``kubectl scale`` wins
that race), and the reconcile handler applies it the way it applies ``kubectl scale``: removed
pumps are closed and offline before their pods go. Nothing is decided while a step is under way
(``scalestep``) or while a pump has no measured rate. No metrics-server or adapter is involved.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from binlog_operator import KIND
from binlog_operator.autoscale import AutoscaleSpec, Decision, Pilot, Rates, counter_value
from binlog_operator.configs import PUMP_HTTP_PORT
from binlog_operator.kube import API_VERSION, KubeClient, KubeError
from binlog_operator.manifests import pump_name, pump_pod
from binlog_operator.pumps import PodAddresses
from binlog_operator.scaledown import ScaleDownError
from binlog_operator.scalestep import Step, step
from binlog_operator.spec import ClusterSpec
from binlog_operator.tlsctx import context_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Look:
    """What one look found and did: the step under way (None: settled), the pilot's decision
    (None: no autoscale, or a step under way) and whether ``spec.pumps.replicas`` was written."""

    step: Step | None
    decision: Decision | None = None
    wrote: bool = False


class Autopilot:
    """Every cluster's pilot and rate samples, kept between looks (lost on a restart: a new
    pilot measures again and waits a whole stabilization window before a scale-down)."""

    def __init__(
        self,
        kube: KubeClient,
        http: aiohttp.ClientSession,
        addresses: PodAddresses,
        *,
        window: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._http = http
        self._addresses = addresses
        self._window = window
        self._clock = clock
        self._pilots: dict[tuple[str, str], tuple[AutoscaleSpec, Pilot, Rates]] = {}

    def forget(self, namespace: str, name: str) -> None:
        self._pilots.pop((namespace, name), None)

    async def look(self, name: str, namespace: str, spec: ClusterSpec, body: Any) -> Look:
        """One look at cluster ``name`` (``body``: the resource as last seen); KubeError."""
        sts = await self._kube.get("apps/v1", "StatefulSet", namespace, pump_name(name))
        if sts is None:
            return Look(None)
        applied = int(sts["spec"].get("replicas", 1))
        st = sts.get("status") or {}
        states = {
            str(p.get("nodeId")): str(p.get("state"))
            for p in (body.get("status") or {}).get("pumps") or []
        }
        scaling = any(
            c.get("type") == "Scaling" and c.get("status") == "True"
            for c in (body.get("status") or {}).get("conditions") or []
        )
        under_way = step(
            spec.pumps.replicas,
            applied,
            int(st.get("replicas", 0)),
            int(st.get("readyReplicas", 0)),
            states,
            lambda i: pump_pod(name, i),
            scaling,
        )
        auto = spec.pumps.autoscale
        if auto is None:
            self.forget(namespace, name)
            return Look(under_way)
        asked = int(((body.get("spec") or {}).get("pumps") or {}).get("replicas", 3))
        pilot, rates = self._pilot(namespace, name, auto)
        now = self._clock()
        if asked != spec.pumps.replicas:  # a manual value outside the bounds
            decision = pilot.decide(now, asked, {})
            return Look(under_way, decision, await self._write(body, namespace, name, decision))
        if under_way is not None:
            return Look(under_way)
        pods = [pump_pod(name, i) for i in range(applied)]
        rates.keep(pods)
        tls = await self._tls(namespace, spec)
        measured: dict[str, float | None] = {}
        for pod in pods:
            value = await self._scrape(namespace, name, pod, tls)
            if value is not None:
                rates.add(pod, self._clock(), value)
            measured[pod] = rates.rate(pod) if value is not None else None
        decision = pilot.decide(now, spec.pumps.replicas, measured)
        return Look(None, decision, await self._write(body, namespace, name, decision))

    def _pilot(self, namespace: str, name: str, auto: AutoscaleSpec) -> tuple[Pilot, Rates]:
        key = (namespace, name)
        kept = self._pilots.get(key)
        if kept is None or kept[0] != auto:  # new, or its bounds/target changed: start over
            rates = kept[2] if kept else Rates(self._window)
            kept = (auto, Pilot(auto, self._clock()), rates)
            self._pilots[key] = kept
        return kept[1], kept[2]

    async def _write(self, body: Any, namespace: str, name: str, decision: Decision) -> bool:
        """``spec.pumps.replicas`` = the decision's count, if it differs and the resource has
        not moved on since ``body`` (else the next look decides again)."""
        asked = int(((body.get("spec") or {}).get("pumps") or {}).get("replicas", 3))
        if decision.desired == asked:
            return False
        version = str(body["metadata"]["resourceVersion"])
        change = {"spec": {"pumps": {"replicas": decision.desired}}}
        try:
            await self._kube.patch(API_VERSION, KIND, namespace, name, version, change)
        except KubeError as e:
            if e.conflict:
                log.info("%s/%s: changed meanwhile; the pilot looks again", namespace, name)
                return False
            raise
        log.info("%s/%s: %s", namespace, name, decision.message)
        return True

    async def _tls(self, namespace: str, spec: ClusterSpec) -> ssl.SSLContext | None:
        if not spec.tls_secret:
            return None
        try:
            return await context_for(self._kube, namespace, spec.tls_secret)
        except ScaleDownError as e:
            raise KubeError(str(e)) from e

    async def _scrape(
        self, namespace: str, name: str, pod: str, tls: ssl.SSLContext | None
    ) -> float | None:
        """The pump's binlog counter; None if it cannot be read now (it counts as unmeasured)."""
        try:
            addr = self._addresses.address(namespace, pump_name(name), pod, PUMP_HTTP_PORT)
        except ScaleDownError as e:
            log.debug("%s: no address: %s", pod, e)
            return None
        url = f"{'https' if tls else 'http'}://{addr}/metrics"
        try:
            async with self._http.get(
                url, ssl=tls or True, timeout=aiohttp.ClientTimeout(total=5)
            ) as r:
                if r.status != 200:
                    log.debug("%s: /metrics answered %d", pod, r.status)
                    return None
                return counter_value(await r.text())
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            log.debug("%s: /metrics unreachable: %r", pod, e)
            return None
