"""The workload generator: plays TiDB's part against a real upstream database.

Each transaction runs on MySQL/MariaDB (or SQLite) and writes its P-binlog and C-binlog
through the pump client exactly as TiDB would (start ts, prewrite with TiDB-encoded rows,
commit ts while the row locks are held, commit or rollback binlog); each DDL runs upstream,
is recorded in the DDL history and written as a DDL binlog. Workloads: ``bank`` (transfers,
an invariant total) and ``mixed`` (many tables and types, DDL mid-stream). Entry points:
:func:`run_workload` and ``python -m tributary.workload``.
"""

from tributary.workload.bank import Bank, total_balance_sql
from tributary.workload.catalog import Catalog, Table
from tributary.workload.env import Env, Workload
from tributary.workload.errors import (
    Abort,
    Conflict,
    ConnectionLost,
    HistoryDiverged,
    UpstreamError,
    WorkloadError,
)
from tributary.workload.mixed import Mixed, MixedOptions
from tributary.workload.runner import Pacer, build_env, make_workload, run_workload, run_writers
from tributary.workload.snapshot import read_rows, total_balance
from tributary.workload.stats import Committed, WorkloadStats
from tributary.workload.txn import BinlogWriter, Executor, TxnContext
from tributary.workload.upstream import Session, Upstream, open_upstream

__all__ = [
    "Abort",
    "Bank",
    "BinlogWriter",
    "Catalog",
    "Committed",
    "Conflict",
    "ConnectionLost",
    "Env",
    "Executor",
    "HistoryDiverged",
    "Mixed",
    "MixedOptions",
    "Pacer",
    "Session",
    "Table",
    "TxnContext",
    "Upstream",
    "UpstreamError",
    "Workload",
    "WorkloadError",
    "WorkloadStats",
    "build_env",
    "make_workload",
    "open_upstream",
    "read_rows",
    "run_workload",
    "run_writers",
    "total_balance",
    "total_balance_sql",
]
