"""What a workload runs against: the upstream, the binlog writers and the DDL history, wired
into one transaction executor and one DDL runner sharing a catalog and the run's counters."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from tributary.workload.catalog import Catalog
from tributary.workload.ddl import DdlRunner
from tributary.workload.stats import WorkloadStats
from tributary.workload.txn import Executor
from tributary.workload.upstream import Upstream


@dataclass(frozen=True)
class Env:
    upstream: Upstream
    catalog: Catalog
    txns: Executor
    ddl: DdlRunner
    stats: WorkloadStats


class Workload(Protocol):
    """A kind of load: ``setup`` creates what it needs (or finds it from an earlier run),
    ``step`` runs one transaction or one DDL with the writer's own random generator."""

    async def setup(self, env: Env) -> None: ...

    async def step(self, env: Env, rng: random.Random) -> None: ...
