"""Drainer settings: drainer.toml's keys, ``DRAINER_*`` environment variables and flags.

Precedence: defaults < ``--config`` TOML file < environment < flags. Every
problem is reported at once by the shared loader (``settings.load``). Keys
tidb-binlog does not have: ``status-addr`` (HTTP on its own port),
``heartbeat-interval`` and ``checkpoint-interval`` (fixed at 1 s and 3 s there),
``syncer.sink-uri`` (the downstream as a URL, overriding ``db-type`` and ``[syncer.to]``),
``syncer.batch-rows``, ``syncer.ddl-history``, ``syncer.to.consistent`` and ``[syncer.catchup]``
(Spark catch-up of a backlog, ``services.drainer.catchup``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

from settings import (
    DURATION,
    HOST_PORT,
    INT_LIST,
    STR_LIST,
    URL_LIST,
    SecuritySettings,
    choice,
    group,
    setting,
    tables,
)
from sinks.filter import DEFAULT_IGNORE_DBS, FilterError, TableFilter

DB_TYPES = ("mysql", "tidb", "file", "pb", "sqlite", "print", "blackhole")


@dataclass(frozen=True)
class TableRule:
    """One ``[[syncer.replicate-do-table]]`` / ``[[syncer.ignore-table]]`` entry."""

    db_name: str = setting("", "schema name or ~regex")
    tbl_name: str = setting("", "table name or ~regex")

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.db_name:
            yield "db-name", "required"
        if not self.tbl_name:
            yield "tbl-name", "required"


@dataclass(frozen=True)
class ToConfig:
    """``[syncer.to]``: the downstream, when ``sink-uri`` does not name it."""

    host: str = setting("127.0.0.1", "MySQL/TiDB host")
    port: int = setting(3306, "MySQL/TiDB port")
    user: str = setting("root", "MySQL/TiDB user")
    password: str = setting("", "MySQL/TiDB password", secret=True)
    consistent: bool = setting(
        True,
        "MySQL: each batch of whole upstream transactions commits together with the checkpoint "
        "(false: parallel workers, partial batches may be visible after a crash)",
    )
    dir: str = setting("", "file sink: directory of the binlog files (default: data-dir)")
    retention_time: int = setting(0, "file sink: days to keep binlog files (0 = forever)")
    path: str = setting("", "sqlite: database file (default: <data-dir>/downstream.db)")


@dataclass(frozen=True)
class CatchUpConfig:
    """``[syncer.catchup]``: hand a backlog to a Spark catch-up job instead of streaming it."""

    enabled: bool = setting(
        False, "start catch-ups when lagging (lag-threshold) and accept PUT /catchup"
    )
    lag_threshold: float = setting(
        300.0,
        "start a catch-up when the binlog being converted is this many seconds behind the "
        "wall clock (0 = only on request)",
        kind=DURATION,
    )
    backlog_threshold: int = setting(
        0,
        "start a catch-up when the pumps hold at least this many binlogs above the drainer's "
        "checkpoint, as last measured (0 = off)",
    )
    backlog_interval: float = setting(
        30.0, "seconds between backlog measurements (with backlog-threshold)", kind=DURATION
    )
    resume_lag: float = setting(
        10.0, "a range ends at the first binlog less than this many seconds behind", kind=DURATION
    )
    idle: float = setting(5.0, "a range ends when no binlog came for this long", kind=DURATION)
    max_range_rows: int = setting(1_000_000, "a range ends once it holds this many row changes")
    staging_dir: str = setting("", "where ranges are staged (default: <data-dir>/catchup)")
    master: str = setting("local[*]", "Spark master of the job")
    partitions: int = setting(4, "parallel writers of the job")
    driver_memory: str = setting("1g", "Spark driver memory of the job")
    retries: int = setting(
        3, "reruns of a job that exited 75 or was killed, before the drainer stops"
    )
    retry_delay: float = setting(5.0, "seconds before a rerun", kind=DURATION)

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.enabled:
            return
        for key, value in (
            ("resume-lag", self.resume_lag),
            ("idle", self.idle),
            ("max-range-rows", self.max_range_rows),
            ("partitions", self.partitions),
            ("backlog-interval", self.backlog_interval),
        ):
            if value <= 0:
                yield key, "must be positive"
        if self.lag_threshold < 0:
            yield "lag-threshold", "must be 0 (only on request) or positive"
        elif self.lag_threshold and self.resume_lag >= self.lag_threshold:
            yield "resume-lag", "must be below lag-threshold"
        if self.retries < 0:
            yield "retries", "must be 0 or positive"
        if self.backlog_threshold < 0:
            yield "backlog-threshold", "must be 0 (off) or positive"


CATCHUP_SCHEMES = ("mysql", "sqlite")  # downstreams the catch-up job writes like the sink does


@dataclass(frozen=True)
class SyncerConfig:
    """``[syncer]``: what is replicated and where it goes."""

    sink_uri: str = setting(
        "",
        "downstream as a URL (mysql://user:pw@host:port/?consistent=true, sqlite:///path, "
        "file:///dir, print://, blackhole://); empty = built from db-type and [syncer.to]",
    )
    db_type: str = setting(
        "mysql", "downstream kind when sink-uri is empty", kind=choice(*DB_TYPES)
    )
    txn_batch: int = setting(20, "row changes per downstream statement batch (parallel mode)")
    worker_count: int = setting(
        16, "downstream connections (parallel mode)", flag=("-c", "--worker-count")
    )
    batch_rows: int = setting(
        0, "row changes per batch handed to the sink; 0 = txn-batch x worker-count x 3"
    )
    safe_mode: bool = setting(
        False, "INSERT as REPLACE, UPDATE as DELETE + REPLACE (always on for 5 min after a start)"
    )
    ignore_txn_commit_ts: tuple[int, ...] = setting(
        (), "commit ts of transactions to skip", kind=INT_LIST
    )
    ignore_schemas: tuple[str, ...] = setting(
        DEFAULT_IGNORE_DBS, "schemas never replicated (names or ~regex)", kind=STR_LIST
    )
    replicate_do_db: tuple[str, ...] = setting(
        (), "replicate only these schemas (and replicate-do-table)", kind=STR_LIST
    )
    replicate_do_table: tuple[TableRule, ...] = tables(TableRule, "replicate only these tables")
    ignore_table: tuple[TableRule, ...] = tables(TableRule, "tables never replicated")
    ddl_history: str = setting(
        "",
        "where DDL jobs come from: empty = the history in etcd (pd-urls), "
        "or a TiDB status URL such as http://tidb:10080",
    )
    to: ToConfig = group(ToConfig, "the downstream")
    catchup: CatchUpConfig = group(CatchUpConfig, "Spark catch-up of a backlog")

    def table_filter(self) -> TableFilter:
        return TableFilter(
            do_dbs=self.replicate_do_db,
            do_tables=[(r.db_name, r.tbl_name) for r in self.replicate_do_table],
            ignore_dbs=self.ignore_schemas,
            ignore_tables=[(r.db_name, r.tbl_name) for r in self.ignore_table],
        )

    def effective_batch_rows(self) -> int:
        return self.batch_rows or self.txn_batch * self.worker_count * 3

    def sink_url(self, data_dir: str) -> str:
        """``sink-uri``, or the URL ``db-type`` and ``[syncer.to]`` describe."""
        if self.sink_uri:
            return self.sink_uri
        to, kind = self.to, self.db_type
        if kind in ("mysql", "tidb"):
            host = to.host if to.host != "127.0.0.1" else os.environ.get("MYSQL_HOST", to.host)
            auth = quote(to.user, safe="") + (
                ":" + quote(to.password, safe="") if to.password else ""
            )
            consistent = "true" if to.consistent else "false"
            return f"mysql://{auth}@{host}:{to.port}/?consistent={consistent}"
        if kind in ("file", "pb"):
            where = os.path.abspath(to.dir or data_dir)
            return f"file://{where}?retention-time={to.retention_time}"
        if kind == "sqlite":
            return "sqlite://" + os.path.abspath(to.path or os.path.join(data_dir, "downstream.db"))
        return f"{kind}://"


@dataclass(frozen=True)
class DrainerConfig:
    """Everything ``binlog-drainer`` can be told."""

    addr: str = setting("127.0.0.1:8249", "gRPC listen address (host:port)", kind=HOST_PORT)
    advertise_addr: str = setting(
        "", "address pumps use to reach this drainer (default: addr)", kind=HOST_PORT
    )
    status_addr: str = setting(
        "",
        "HTTP ops API address (status, state, metrics, health); empty = gRPC port + 1",
        kind=HOST_PORT,
    )
    data_dir: str = setting("data.drainer", "directory of the savepoint and node id")
    node_id: str = setting("", "node id (default: kept in <data-dir>/.node, else hostname:port)")
    pd_urls: tuple[str, ...] = setting(
        ("http://127.0.0.1:2379",), "etcd endpoints, comma separated", kind=URL_LIST
    )
    detect_interval: float = setting(
        5.0, "seconds between two listings of the pump records", kind=DURATION
    )
    initial_commit_ts: int = setting(
        -1,
        "commit ts to start after when there is no checkpoint yet; -1 = the current TSO time",
    )
    compressor: str = setting(
        "", "compression of the pull stream: only '' (none) is supported", kind=choice("", "gzip")
    )
    synced_check_time: float = setting(
        5.0, "minutes without a binlog applied after which /status reports Synced"
    )
    cache_binlog_count: int = setting(8, "merged binlogs queued for the sink")
    heartbeat_interval: float = setting(1.0, "seconds between registry heartbeats", kind=DURATION)
    checkpoint_interval: float = setting(
        3.0, "seconds between two checkpoint saves (and one at shutdown)", kind=DURATION
    )
    log_level: str = setting(
        "info",
        "log level",
        kind=choice("debug", "info", "warn", "warning", "error"),
        flag=("-L", "--log-level"),
    )
    log_format: str = setting("text", "log format", kind=choice("text", "json"))
    log_file: str = setting("", "log file (default: stderr)")
    syncer: SyncerConfig = group(SyncerConfig, "the sink")
    security: SecuritySettings = group(SecuritySettings, "TLS for gRPC and HTTP")

    @property
    def advertise(self) -> str:
        return self.advertise_addr or self.addr

    def validate(self) -> Iterator[tuple[str, str]]:
        host = self.advertise.rsplit(":", 1)[0]
        if host in ("0.0.0.0", "::", "[::]"):
            yield "advertise-addr", "must be an address pumps can reach, not a wildcard"
        if self.compressor:
            yield "compressor", "gzip is not supported by this drainer's pull stream; use ''"
        if self.initial_commit_ts < -1:
            yield "initial-commit-ts", "must be -1 (the current TSO time) or a commit ts >= 0"
        for key, value in (
            ("detect-interval", self.detect_interval),
            ("heartbeat-interval", self.heartbeat_interval),
            ("checkpoint-interval", self.checkpoint_interval),
            ("synced-check-time", self.synced_check_time),
        ):
            if value <= 0:
                yield key, "must be positive"
        if self.cache_binlog_count < 1:
            yield "cache-binlog-count", "must be at least 1"
        yield from self._validate_syncer()

    def _validate_syncer(self) -> Iterator[tuple[str, str]]:
        syncer = self.syncer
        for key, value in (
            ("syncer.txn-batch", syncer.txn_batch),
            ("syncer.worker-count", syncer.worker_count),
        ):
            if value < 1:
                yield key, "must be at least 1"
        if syncer.batch_rows < 0:
            yield "syncer.batch-rows", "must be 0 (automatic) or positive"
        try:
            syncer.table_filter()
        except FilterError as e:
            yield "syncer", str(e)
        if syncer.sink_uri and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", syncer.sink_uri):
            yield "syncer.sink-uri", "must be a URL such as mysql://root@127.0.0.1:3306/"
        scheme = syncer.sink_url(self.data_dir).split("://", 1)[0].lower()
        if syncer.catchup.enabled and scheme not in CATCHUP_SCHEMES:
            yield (
                "syncer.catchup.enabled",
                f"catch-up writes mysql:// or sqlite://, not {scheme}://",
            )

    def catchup_staging(self) -> str:
        return self.syncer.catchup.staging_dir or os.path.join(self.data_dir, "catchup")
