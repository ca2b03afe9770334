"""What the kopf handlers share: the Kubernetes client, the HTTP session, the condition writers,
the changefeed sync, the ``Reconciler``, the rolling update's driver, the pumps' auto pilot and
a lock per cluster, built once at startup and closed at cleanup.

``handlers`` (BinlogCluster) and ``nodehandlers`` (Pump, Drainer) both take it from
``memo.ctx``. Invariant: the reporting methods never raise for a failed status write (it is
logged), so a handler's own error and its event still go out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from binlog_operator import DRAINER_KIND, PUMP_KIND
from binlog_operator.autopilot import Autopilot
from binlog_operator.conditions import Change, ConditionWriter, KubeStatusStore
from binlog_operator.feedsync import FeedSync
from binlog_operator.kube import Credentials, KubeClient, KubeError
from binlog_operator.noderes import DrainerProblem
from binlog_operator.options import Options
from binlog_operator.pumps import HttpCloser, Target, addresses_from_env
from binlog_operator.reconcile import Reconciler
from binlog_operator.rolling import Rollout
from binlog_operator.scaledown import PumpCloser
from binlog_operator.spec import ClusterSpec, SpecError
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv

log = logging.getLogger(__name__)


class Context:
    """What the handlers share: built at startup, closed at cleanup."""

    def __init__(self, creds: Credentials, options: Options) -> None:
        self.kube = KubeClient(creds)
        self.http = aiohttp.ClientSession()
        self.options = options
        self.conditions = ConditionWriter(KubeStatusStore(self.kube))
        self.node_conditions = {
            kind: ConditionWriter(KubeStatusStore(self.kube, kind))
            for kind in (PUMP_KIND, DRAINER_KIND)
        }
        addresses = addresses_from_env()

        def closer_for(target: Target) -> PumpCloser:
            return HttpCloser(self.http, addresses, target)

        self.feeds = FeedSync(self.kube, self.http, addresses, _open_kv, options.etcd_timeout)
        self.rollout = Rollout(
            self.kube, _open_kv, etcd_timeout=options.etcd_timeout, max_lag=options.roll_max_lag
        )
        self.autopilot = Autopilot(self.kube, self.http, addresses, window=options.autoscale_window)
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.reconciler = Reconciler(
            self.kube,
            _open_kv,
            closer_for,
            default_image=options.image,
            offline_timeout=options.offline_timeout,
            etcd_timeout=options.etcd_timeout,
            retry_delay=options.retry_delay,
            drainer_close_timeout=options.drainer_close_timeout,
            spark_account=options.spark_account,
        )

    def lock(self, namespace: str, cluster: str) -> asyncio.Lock:
        """The cluster's lock: held around every apply of its StatefulSets and every step of
        its roll, so a step never lowers a partition an apply is about to set."""
        return self._locks.setdefault((namespace, cluster), asyncio.Lock())

    def forget(self, namespace: str, cluster: str) -> None:
        """Drop the cluster's lock and condition writer (it is gone)."""
        self._locks.pop((namespace, cluster), None)
        self.conditions.forget(namespace, cluster)
        self.autopilot.forget(namespace, cluster)

    def live_spec(
        self, body: Mapping[str, Any]
    ) -> tuple[ClusterSpec, tuple[dict[str, Any], ...]] | None:
        """What a timer acts on: the cluster's parsed spec and drainer entries, or None while
        it is being deleted or its spec does not parse (reconcile reports that)."""
        if "deletionTimestamp" in body.get("metadata", {}):
            return None
        try:
            return self.reconciler.parse_with_entries(dict(body["spec"]))
        except SpecError:
            return None

    async def report(self, namespace: str, name: str, *changes: Change) -> None:
        """Set conditions on an error path: a failure to write them is logged, not raised,
        so the handler's own error (and its event) still goes out."""
        try:
            await self.conditions.set(namespace, name, *changes)
        except KubeError as e:
            log.warning("%s/%s: conditions not written: %s", namespace, name, e)

    async def report_node(
        self, kind: str, namespace: str, name: str, problem: DrainerProblem | None
    ) -> None:
        """A Pump's or Drainer's ``Degraded`` condition and ``lastError`` (cleared when None);
        a failure to write them is logged, not raised."""
        if problem is None:
            change = Change("Degraded", False, "Reconciled")
        else:
            change = Change("Degraded", True, problem.reason, problem.message[:1000])
        try:
            await self.node_conditions[kind].set(namespace, name, change)
            error = None if problem is None else problem.message[:1000]
            await self.kube.patch_status(namespace, name, None, {"lastError": error}, kind)
        except KubeError as e:
            log.warning("%s %s/%s: status not written: %s", kind, namespace, name, e)

    async def close(self) -> None:
        await self.kube.close()
        await self.http.close()


@asynccontextmanager
async def _open_kv(endpoints: Any) -> AsyncIterator[Kv]:
    async with EtcdKv.connect(list(endpoints)) as kv:
        yield kv
