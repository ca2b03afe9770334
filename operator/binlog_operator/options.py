"""The operator's own settings, from ``BINLOG_OPERATOR_*`` environment variables (frozen).

Read once at import, because kopf's decorators take the timer interval when the handlers module
is imported. Every field documents its unit and default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from binlog_operator.spec import DEFAULT_IMAGE, DEFAULT_SPARK_ACCOUNT


@dataclass(frozen=True)
class Options:
    image: str = DEFAULT_IMAGE
    """Image of components whose BinlogCluster names none (``BINLOG_OPERATOR_IMAGE``)."""
    status_interval: float = 15.0
    """Seconds between two status refreshes from etcd (``BINLOG_OPERATOR_STATUS_INTERVAL``)."""
    offline_timeout: float = 600.0
    """Seconds a scale-down waits for closed pumps to go offline before giving up for this
    attempt (``BINLOG_OPERATOR_OFFLINE_TIMEOUT``)."""
    retry_delay: float = 15.0
    """Seconds before a failed reconcile is retried (``BINLOG_OPERATOR_RETRY_DELAY``)."""
    etcd_timeout: float = 10.0
    """Seconds to connect to a cluster's etcd (``BINLOG_OPERATOR_ETCD_TIMEOUT``)."""
    drainer_close_timeout: float = 120.0
    """Seconds a cluster's deletion keeps trying to close its drainers (``retry_delay`` apart)
    before it goes on without them (``BINLOG_OPERATOR_DRAINER_CLOSE_TIMEOUT``)."""
    spark_account: str = DEFAULT_SPARK_ACCOUNT
    """Default service account of a drainer's Kubernetes catch-up: the chart's Spark account
    (``BINLOG_OPERATOR_SPARK_SERVICE_ACCOUNT``)."""
    roll_interval: float = 5.0
    """Seconds between two looks at a rolling update, each lowering a partition at most once
    (``BINLOG_OPERATOR_ROLL_INTERVAL``)."""
    roll_max_lag: float = 30.0
    """Seconds a replaced pump's max commit ts (a drainer's checkpoint) may be behind its update
    ts for the roll to go on to the next pod (``BINLOG_OPERATOR_ROLL_MAX_LAG``)."""
    roll_progress_deadline: float = 600.0
    """Seconds a rolling update may wait for the same pod before the ``Upgrading`` condition says
    ``ProgressDeadlineExceeded`` (and a Warning event is sent); the roll keeps waiting, it never
    skips a pod (``BINLOG_OPERATOR_ROLL_PROGRESS_DEADLINE``)."""
    autoscale_interval: float = 15.0
    """Seconds between two looks of the pumps' auto pilot: a scrape of every pump's /metrics
    and, with ``spec.pumps.autoscale``, a decision (``BINLOG_OPERATOR_AUTOSCALE_INTERVAL``)."""
    autoscale_window: float = 60.0
    """Seconds a pump's write rate is measured over (from the newest scrape back to one at
    least this old, or the oldest kept) (``BINLOG_OPERATOR_AUTOSCALE_WINDOW``)."""


def from_env(env: Mapping[str, str] = os.environ) -> Options:
    def num(key: str, default: float) -> float:
        raw = env.get(f"BINLOG_OPERATOR_{key}")
        if raw is None:
            return default
        value = float(raw)
        if value <= 0:
            raise ValueError(f"BINLOG_OPERATOR_{key} must be positive, not {raw!r}")
        return value

    d = Options()
    return Options(
        image=env.get("BINLOG_OPERATOR_IMAGE", d.image),
        status_interval=num("STATUS_INTERVAL", d.status_interval),
        offline_timeout=num("OFFLINE_TIMEOUT", d.offline_timeout),
        retry_delay=num("RETRY_DELAY", d.retry_delay),
        etcd_timeout=num("ETCD_TIMEOUT", d.etcd_timeout),
        drainer_close_timeout=num("DRAINER_CLOSE_TIMEOUT", d.drainer_close_timeout),
        spark_account=env.get("BINLOG_OPERATOR_SPARK_SERVICE_ACCOUNT", d.spark_account),
        roll_interval=num("ROLL_INTERVAL", d.roll_interval),
        roll_max_lag=num("ROLL_MAX_LAG", d.roll_max_lag),
        roll_progress_deadline=num("ROLL_PROGRESS_DEADLINE", d.roll_progress_deadline),
        autoscale_interval=num("AUTOSCALE_INTERVAL", d.autoscale_interval),
        autoscale_window=num("AUTOSCALE_WINDOW", d.autoscale_window),
    )
