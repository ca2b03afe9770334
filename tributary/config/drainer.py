"""Drainer settings: drainer.toml's keys, ``DRAINER_*`` environment variables and flags.

Precedence: defaults < ``--config`` TOML file < environment < flags. Every
problem is reported at once by the shared loader (``settings.load``). Keys
tidb-binlog does not have: ``status-addr`` (HTTP on its own port),
``heartbeat-interval`` and ``checkpoint-interval`` (fixed at 1 s and 3 s there),
``syncer.sink-uri`` (the downstream as a URL, overriding ``db-type`` and ``[syncer.to]``),
``syncer.batch-rows``, ``syncer.ddl-history``, ``syncer.to.consistent`` and ``[syncer.catchup]``
(Spark catch-up of a backlog, ``services.drainer.catchup``). tidb-binlog's stock
``drainer.toml`` and its flags (``-config=``, ``-L``, ``-txn-batch``, ``-dest-db-type`` ...) load
as they are: ``[syncer.to] encrypted_password`` is decrypted at load (``tributary.encrypt``);
its keys and flags this drainer does not implement are listed in ``IGNORED`` with the reason a
warning gives, or refused where ignoring them would change what reaches the downstream.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import quote

from tributary.change import DEFAULT_IGNORE_DBS, FilterError, TableFilter
from tributary.config.drainer_checkpoint import CheckpointToConfig
from tributary.encrypt import DecryptError, decrypt
from tributary.settings import (
    DURATION,
    INT_LIST,
    OPTIONAL_HOST_PORT,
    STR_LIST,
    URL_LIST,
    Ignored,
    ListenSettings,
    LogSettings,
    SecuritySettings,
    choice,
    group,
    setting,
    tables,
)

DB_TYPES = ("mysql", "tidb", "file", "pb", "kafka", "sqlite", "print", "blackhole")

READ_TIMEOUT = 60.0  # the MySQL sink's default (sinks.mysql_config), tidb-binlog's "1m"

_NO_PUSH = "no Prometheus push gateway: scrape /metrics on the HTTP port"
_SINK_MODE = "how transactions are split and ordered is the sink's mode ([syncer.to] consistent)"
_NO_LOOPBACK = "no loopback control (dual-active mark table): every transaction is replicated"
_NO_ZOOKEEPER = "brokers come from kafka-addrs; finding them through ZooKeeper is not implemented"
_V2_FILTER = "tidb-binlog's v2 filter rules are not implemented: use replicate-do-db/-table"

IGNORED = (
    Ignored("metrics-addr", _NO_PUSH, flags=("--metrics-addr",)),
    Ignored("metrics-interval", _NO_PUSH, flags=("--metrics-interval",)),
    Ignored(
        "log-rotate", "deprecated in tidb-binlog, without effect there too", flags=("--log-rotate",)
    ),
    Ignored(
        "syncer.sync-ddl",
        "DDL is always replicated (false is refused)",
        flags=("--sync-ddl",),
        switch=True,
        refused=("false",),
    ),
    Ignored(
        "syncer.loopback-control",
        _NO_LOOPBACK + " (true is refused)",
        flags=("--loopback-control",),
        switch=True,
        refused=("true",),
    ),
    Ignored("syncer.channel-id", _NO_LOOPBACK, flags=("--channel-id",)),
    Ignored(
        "syncer.sql-mode",
        "DDL is replayed as TiDB ran it; downstream sessions keep the server's sql_mode",
    ),
    Ignored("syncer.enable-dispatch", _SINK_MODE, flags=("--enable-dispatch",), switch=True),
    Ignored("syncer.disable-dispatch", _SINK_MODE, flags=("--disable-dispatch",), switch=True),
    Ignored("syncer.enable-detect", _SINK_MODE, flags=("--enable-detect",), switch=True),
    Ignored("syncer.disable-detect", _SINK_MODE, flags=("--disable-detect",), switch=True),
    Ignored(
        "syncer.load-schema-snapshot",
        "table schemas always come from the DDL history (syncer.ddl-history)",
        flags=("--load-schema-snapshot",),
        switch=True,
    ),
    Ignored(
        "syncer.relay",
        "no relay log: with [syncer.to] consistent each downstream transaction commits with the "
        "checkpoint, so a crash leaves no half-applied transaction",
    ),
    Ignored("syncer.relay.log-dir", "no relay log", flags=("--relay-log-dir",)),
    Ignored("syncer.relay.max-file-size", "no relay log", flags=("--relay-max-file-size",)),
    Ignored("syncer.case-sensitive", _V2_FILTER, refuse=True),
    Ignored("syncer.table-migrate-rule", _V2_FILTER, refuse=True),
    Ignored("syncer.binlog-filter-rule", _V2_FILTER, refuse=True),
    Ignored(
        "syncer.to.checkpoint.security",
        "the checkpoint is written in the downstream, over its connection (no TLS)",
        refuse=True,
    ),
    Ignored("syncer.to.security", "TLS to the downstream MySQL/TiDB is not supported", refuse=True),
    Ignored(
        "syncer.to.params", "session variables for the downstream are not supported", refuse=True
    ),
    Ignored(
        "syncer.to.sync-mode",
        "rows are written with every column (sync-mode 1; 2 is refused)",
        refused=("2",),
    ),
    Ignored("syncer.to.merge", "an Oracle downstream option; no Oracle downstream here"),
    Ignored("syncer.to.zookeeper-addrs", _NO_ZOOKEEPER),
)


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
    encrypted_password: str = setting(
        "",
        "MySQL/TiDB password encrypted by binlogctl -cmd encrypt (key: $BINLOG_SECRET_KEY or "
        "tidb-binlog's default); when set, password is ignored",
        toml="encrypted_password",
        secret=True,
    )
    read_timeout: float = setting(
        READ_TIMEOUT, "seconds a downstream statement's reply may take", kind=DURATION
    )
    consistent: bool = setting(
        True,
        "MySQL: each batch of whole upstream transactions commits together with the checkpoint "
        "(false: parallel workers, partial batches may be visible after a crash)",
    )
    dir: str = setting("", "file sink: directory of the binlog files (default: data-dir)")
    retention_time: int = setting(0, "file sink: days to keep binlog files (0 = forever)")
    path: str = setting("", "sqlite: database file (default: <data-dir>/downstream.db)")
    kafka_addrs: str = setting(
        "127.0.0.1:9092", "kafka: brokers, comma separated (environment KAFKA_ADDRS)"
    )
    kafka_version: str = setting("0.8.2.0", "kafka: accepted for tidb-binlog; negotiated instead")
    kafka_max_messages: int = setting(1024, "kafka: messages in flight before waiting for acks")
    kafka_max_message_size: int = setting(
        1 << 30, "kafka: bytes of the largest message (transaction) the producer sends"
    )
    kafka_client_id: str = setting("tidb_binlog", "kafka: client id")
    topic_name: str = setting("", "kafka: topic (default: <cluster-id>_obinlog)")
    kafka_exactly_once: bool = setting(
        False,
        "kafka: each batch and its checkpoint in one Kafka transaction (checkpoint in the "
        "compacted topic <topic>_checkpoint); read_committed consumers see every upstream "
        "transaction exactly once",
    )
    kafka_transactional_id: str = setting(
        "", "kafka: transactional id of the exactly-once producer (default: tributary-<topic>)"
    )
    kafka_partition_by: str = setting(
        "fixed",
        "kafka: fixed (all on partition 0), table or key (murmur2 of the table or row key)",
        kind=choice("fixed", "table", "key"),
    )
    kafka_message_per: str = setting(
        "txn",
        "kafka: one message per transaction (txn) or per row change (row)",
        kind=choice("txn", "row"),
    )
    kafka_sasl_mechanism: str = setting(
        "",
        "kafka: SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 ('' = no SASL)",
        kind=choice("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    )
    kafka_sasl_user: str = setting("", "kafka: SASL user")
    kafka_sasl_password: str = setting("", "kafka: SASL password", secret=True)
    kafka_tls: bool = setting(False, "kafka: TLS to the brokers (on when kafka-ssl-ca is set)")
    kafka_ssl_ca: str = setting("", "kafka: CA file (PEM) to verify the brokers")
    kafka_ssl_cert: str = setting("", "kafka: client certificate file (PEM)")
    kafka_ssl_key: str = setting("", "kafka: client key file (PEM)")
    checkpoint: CheckpointToConfig = group(
        CheckpointToConfig, "where tidb-binlog's drainer kept the checkpoint (mysql/tidb)"
    )

    def kafka_url(self) -> str:
        """The ``kafka://`` URL of these keys (options beyond tidb-binlog's only when set)."""
        addrs = self.kafka_addrs
        if addrs == "127.0.0.1:9092":
            addrs = os.environ.get("KAFKA_ADDRS", addrs)
        query = (
            f"kafka-version={quote(self.kafka_version)}&kafka-max-messages={self.kafka_max_messages}"
            f"&kafka-max-message-size={self.kafka_max_message_size}"
            f"&kafka-client-id={quote(self.kafka_client_id)}"
        )
        extra = {
            "kafka-exactly-once": "true" if self.kafka_exactly_once else "",
            "kafka-transactional-id": self.kafka_transactional_id,
            "kafka-partition-by": ""
            if self.kafka_partition_by == "fixed"
            else self.kafka_partition_by,
            "kafka-message-per": "" if self.kafka_message_per == "txn" else self.kafka_message_per,
            "kafka-sasl-mechanism": self.kafka_sasl_mechanism,
            "kafka-tls": "true" if self.kafka_tls else "",
            "kafka-ssl-ca": self.kafka_ssl_ca,
            "kafka-ssl-cert": self.kafka_ssl_cert,
            "kafka-ssl-key": self.kafka_ssl_key,
        }
        query += "".join(f"&{k}={quote(v, safe='')}" for k, v in extra.items() if v)
        auth = ""
        if self.kafka_sasl_user:
            auth = quote(self.kafka_sasl_user, safe="")
            auth += f":{quote(self.kafka_sasl_password, safe='')}@"
        topic = quote(self.topic_name, safe="")
        return f"kafka://{auth}{addrs.replace(' ', '')}/{topic}?{query}"

    def effective_password(self) -> str:
        """``encrypted_password`` decrypted when set, else ``password`` (DecryptError)."""
        return decrypt(self.encrypted_password) if self.encrypted_password else self.password

    def validate(self) -> Iterator[tuple[str, str]]:
        try:
            self.effective_password()
        except (DecryptError, ValueError) as e:
            yield "encrypted_password", f"cannot decrypt: {e}"
        if self.read_timeout <= 0:
            yield "read-timeout", "must be positive"


@dataclass(frozen=True)
class KubernetesCatchUpConfig:
    """``[syncer.catchup.kubernetes]``: the job on Spark-on-Kubernetes, its driver in this pod."""

    enabled: bool = setting(
        False, "run the job's executors as pods (client mode; master = k8s://<api-server>)"
    )
    api_server: str = setting("https://kubernetes.default.svc", "the Kubernetes API server")
    namespace: str = setting("", "namespace of the executor pods (normally the drainer's)")
    image: str = setting("", "the executors' image (the product image)")
    service_account: str = setting("tributary-spark", "the executors' service account")
    staging_claim: str = setting(
        "", "PersistentVolumeClaim holding staging-dir, mounted by drainer and executors"
    )
    staging_mount: str = setting(
        "/staging", "where the claim is mounted (in the drainer's pod and the executors')"
    )
    executors: int = setting(2, "executor pods")
    executor_cores: int = setting(1, "cores per executor")
    executor_memory: str = setting("1g", "memory per executor (JVM heap, e.g. 2g)")
    ca_file: str = setting("", "API server CA file (default: the pod's service account's)")
    token_file: str = setting("", "bearer token file (default: the pod's service account's)")
    pod_name: str = setting("", "this drainer's pod (default: $POD_NAME, downward API)")
    pod_ip: str = setting("", "this drainer's pod IP (default: $POD_IP, downward API)")

    @property
    def master(self) -> str:
        return f"k8s://{self.api_server}"

    def driver_pod(self) -> str:
        return self.pod_name or os.environ.get("POD_NAME", "")

    def driver_host(self) -> str:
        return self.pod_ip or os.environ.get("POD_IP", "")

    def problems(self) -> Iterator[tuple[str, str]]:
        """What is wrong for a k8s catch-up (keys relative to ``[syncer.catchup]``)."""
        for key, value in (
            ("namespace", self.namespace),
            ("image", self.image),
            ("staging-claim", self.staging_claim),
            ("service-account", self.service_account),
        ):
            if not value:
                yield f"kubernetes.{key}", "required"
        if not re.match(r"^https?://[^/]+", self.api_server):
            yield "kubernetes.api-server", "must be an http(s):// URL of the API server"
        if not os.path.isabs(self.staging_mount):
            yield "kubernetes.staging-mount", "must be an absolute path"
        if self.executors < 1 or self.executor_cores < 1:
            yield "kubernetes.executors", "executors and executor-cores must be at least 1"
        if not re.fullmatch(r"\d+[kmgt]?", self.executor_memory, re.IGNORECASE):
            yield "kubernetes.executor-memory", "must be a JVM size such as 512m or 2g"
        for key, path in (("ca-file", self.ca_file), ("token-file", self.token_file)):
            if path and not os.path.isfile(path):
                yield f"kubernetes.{key}", f"{path} is not a file"
        if not self.driver_pod():
            yield "kubernetes.pod-name", "unknown: set POD_NAME (downward API metadata.name)"
        if not self.driver_host():
            yield "kubernetes.pod-ip", "unknown: set POD_IP (downward API status.podIP)"


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
    kubernetes: KubernetesCatchUpConfig = group(
        KubernetesCatchUpConfig, "the job on Spark-on-Kubernetes (client mode)"
    )

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.enabled:
            return
        if self.kubernetes.enabled:
            yield from self.kubernetes.problems()
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
        secret=True,
    )
    db_type: str = setting(
        "mysql",
        "downstream kind when sink-uri is empty",
        kind=choice(*DB_TYPES),
        flag=("--syncer-db-type", "--dest-db-type"),
    )
    txn_batch: int = setting(
        20,
        "row changes per downstream statement batch (parallel mode)",
        flag=("--syncer-txn-batch", "--txn-batch"),
    )
    worker_count: int = setting(
        16, "downstream connections (parallel mode)", flag=("-c", "--worker-count")
    )
    batch_rows: int = setting(
        0, "row changes per batch handed to the sink; 0 = txn-batch x worker-count x 3"
    )
    safe_mode: bool = setting(
        False,
        "INSERT as REPLACE, UPDATE as DELETE + REPLACE (always on for 5 min after a start)",
        flag=("--syncer-safe-mode", "--safe-mode"),
    )
    ignore_txn_commit_ts: tuple[int, ...] = setting(
        (), "commit ts of transactions to skip", kind=INT_LIST
    )
    ignore_schemas: tuple[str, ...] = setting(
        DEFAULT_IGNORE_DBS,
        "schemas never replicated (names or ~regex)",
        kind=STR_LIST,
        flag=("--syncer-ignore-schemas", "--ignore-schemas"),
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

    def sink_scheme(self) -> str:
        """The scheme of ``sink_url`` (without decrypting a password)."""
        if self.sink_uri:
            return self.sink_uri.split("://", 1)[0].lower()
        kind = self.db_type
        return {"tidb": "mysql", "pb": "file"}.get(kind, kind)

    def sink_url(self, data_dir: str) -> str:
        """``sink-uri``, or the URL ``db-type`` and ``[syncer.to]`` describe."""
        if self.sink_uri:
            return self.sink_uri
        to, kind = self.to, self.db_type
        if kind in ("mysql", "tidb"):
            host = to.host if to.host != "127.0.0.1" else os.environ.get("MYSQL_HOST", to.host)
            password = to.effective_password()
            auth = quote(to.user, safe="") + (":" + quote(password, safe="") if password else "")
            query = "consistent=" + ("true" if to.consistent else "false")
            if to.read_timeout != READ_TIMEOUT:
                query += f"&read-timeout={to.read_timeout:g}"
            query += to.checkpoint.url_options()
            return f"mysql://{auth}@{host}:{to.port}/?{query}"
        if kind in ("file", "pb"):
            where = os.path.abspath(to.dir or data_dir)
            return f"file://{where}?retention-time={to.retention_time}"
        if kind == "kafka":
            return to.kafka_url()
        if kind == "sqlite":
            return "sqlite://" + os.path.abspath(to.path or os.path.join(data_dir, "downstream.db"))
        return f"{kind}://"


@dataclass(frozen=True)
class DrainerConfig:
    """Everything ``binlog-drainer`` can be told."""

    ignored_keys: ClassVar[tuple[Ignored, ...]] = IGNORED
    listen: ListenSettings = group(
        ListenSettings,
        "the gRPC listen address",
        inline=True,
        default=ListenSettings("127.0.0.1:8249"),
    )
    status_addr: str = setting(
        "",
        "an extra address of the HTTP ops API (status, metrics ...), also served on the gRPC port",
        kind=OPTIONAL_HOST_PORT,
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
    initial_state: str = setting(
        "",
        "a drainer state exported by binlogctl export-drainer-state: the first start checks it "
        "against the cluster, downstream and data directory and continues after its checkpoint "
        "(initial-commit-ts is then not used); '' = none",
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
    rejoin: bool = setting(
        False,
        "start although this data directory's drainer was taken offline (removes its OFFLINE "
        "marker; without it such a drainer refuses to start)",
    )
    log: LogSettings = group(LogSettings, "logging", inline=True)
    syncer: SyncerConfig = group(SyncerConfig, "the sink")
    security: SecuritySettings = group(SecuritySettings, "TLS for gRPC and HTTP")

    def validate(self) -> Iterator[tuple[str, str]]:
        if self.listen.wildcard_advertise:
            yield "advertise-addr", "must be an address pumps can reach, not a wildcard"
        if self.compressor:
            yield "compressor", "gzip is not supported by this drainer's pull stream; use ''"
        if self.initial_commit_ts < -1:
            yield "initial-commit-ts", "must be -1 (the current TSO time) or a commit ts >= 0"
        if self.initial_state and self.initial_commit_ts != -1:
            yield "initial-state", "give initial-state or initial-commit-ts, not both"
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
        for key, problem in syncer.to.checkpoint.problems(
            syncer.db_type, syncer.sink_uri, syncer.to.host, syncer.to.port
        ):
            yield f"syncer.{key}", problem
        scheme = syncer.sink_scheme()
        if syncer.catchup.enabled and scheme not in CATCHUP_SCHEMES:
            yield (
                "syncer.catchup.enabled",
                f"catch-up writes mysql:// or sqlite://, not {scheme}://",
            )
        k8s = syncer.catchup.kubernetes
        if syncer.catchup.enabled and k8s.enabled:
            staging = os.path.abspath(self.catchup_staging())
            mount = os.path.abspath(k8s.staging_mount)
            if os.path.commonpath([staging, mount]) != mount or staging == mount:
                yield (
                    "syncer.catchup.staging-dir",
                    f"{staging} must be below syncer.catchup.kubernetes.staging-mount ({mount}):"
                    " the executors read the staged range from the shared claim at that path",
                )

    def catchup_staging(self) -> str:
        return self.syncer.catchup.staging_dir or os.path.join(self.data_dir, "catchup")
