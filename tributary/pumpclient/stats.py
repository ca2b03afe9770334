"""Counters of one pump client, as plain numbers. Invariant: counters only grow.

Exported where a service owns the client: for ``pump://`` sinks (``sinks.pump.counters``) the
drainer's ``/metrics`` has ``binlog_drainer_pump_client_events_total{type}`` and the capture's
``ticdc_sink_pump_client_events_total{namespace,changefeed,type}``, ``type`` being a field
name below. The load
generator's and the demo's clients live for one run and export nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ClientStats:
    prewrites_ok: int = 0  # P-binlogs acknowledged by a pump
    prewrites_failed: int = 0  # write_binlog raised for a P-binlog
    prewrites_redirected: int = 0  # refusals of pumps that cannot take prewrites now
    commits_ok: int = 0  # C-binlogs (commit/rollback) acknowledged
    commits_failed: int = 0  # C-binlogs given up on (logged, not raised)
    commits_unmatched: int = 0  # C-binlogs whose P-binlog pump was unknown
    commits_deferred: int = 0  # copies for a pump that may hold the P-binlog, left to retry
    commits_late: int = 0  # such copies the background retry delivered
    rpc_errors: int = 0  # failed RPCs of any kind
    retries: int = 0  # extra attempts after a failed one
    backoff_writes: int = 0  # P-binlogs saved by the last-resort pass
    probes: int = 0  # probes sent to unavailable pumps
    probe_recoveries: int = 0  # pumps made available again by a probe
    unary_rpcs: int = 0  # binlog.Pump/WriteBinlog calls (probes included)
    batch_rpcs: int = 0  # binlogext.PumpBatch/WriteBinlogs calls
    batched_binlogs: int = 0  # binlogs carried by those calls
