"""The catch-up job: a staged commit-ts range, compacted per primary key, applied to a sink.

``python -m services.spark.catchup --staging DIR [--sink URL]`` (or through ``spark-submit``);
the sink URL may come from ``CATCHUP_SINK_URL`` instead, keeping a password out of argv. With a
``k8s://`` master the process is a client-mode driver in its own pod (the drainer's): the
``--k8s-*`` options describe the executors (``services.spark.k8s.client_conf``; the pod template
is written beside the staging directory), ``--conf k=v`` adds Spark settings. SIGTERM stops the
session (Spark deletes its executor pods) before the process exits. It
reads ``DIR`` (``staging.format``), keeps each key's last change (``services.spark.compact``),
and writes tombstones and upserts through the target for the URL's scheme (MySQL/MariaDB over
JDBC, SQLite, Parquet lake). Progress goes to stdout as JSON lines (phases, and rows done of the
range's staged rows with rate and ETA: ``services.spark.progress``), ending with one
``{"event": "done", ...}`` or ``{"event": "failed", ...}``; the rows line also goes to stderr
(redrawn on a terminal, else logged: ``--progress``); the exit status is 0 on success, 75
when a rerun may succeed, 1 otherwise. The checkpoint is not this job's business: whoever
submitted it moves its checkpoint to the range's end after a 0 exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from services.spark.compact import compact, tombstones, upserts
from services.spark.errors import JobError
from services.spark.jdbc import MysqlEndpoint
from services.spark.k8s import STAGING_MOUNT, K8sSubmission, client_conf, pod_template
from services.spark.mysql_target import MysqlTarget
from services.spark.progress import Progress, add_progress_arguments, open_meter
from services.spark.session import spark_session
from services.spark.target import TableChanges, Target
from services.spark.targets import open_target
from services.spark.terminate import StopOnSigterm, stop_quietly
from tributary.staging.format import RangeInfo, StagedTable, StagingError, read_range

log = logging.getLogger(__name__)

SINK_ENV = "CATCHUP_SINK_URL"
EXIT_RETRIABLE = 75  # EX_TEMPFAIL
LOAD_DIR = "_load"  # in the staging directory: the MySQL writer's CSV files while it runs


def read_changes(spark: SparkSession, directory: str | Path, table: StagedTable) -> DataFrame:
    return spark.read.parquet(str(Path(directory) / table.directory))


def plan(
    spark: SparkSession, directory: str | Path, info: RangeInfo, *, cache: bool = True
) -> list[TableChanges]:
    """Per staged table: its compacted changes (cached if ``cache``: for a target reading
    them more than once), upserts and tombstones (None when nothing staged was a delete)."""
    out: list[TableChanges] = []
    for t in info.tables:
        if not t.rows:
            continue
        last = compact(read_changes(spark, directory, t), t.primary_key)
        if cache:
            last = last.persist(StorageLevel.MEMORY_AND_DISK)
        gone = tombstones(last, t.primary_key) if t.deletes is None or t.deletes else None
        out.append(TableChanges(t, upserts(last), gone, last))
    return out


def _target(spark: SparkSession, url: str, directory: Path, partitions: int) -> Target:
    """The sink's writer; MySQL's CSV files go next to the staged range (a shared volume in
    a cluster), under ``LOAD_DIR``."""
    if urlsplit(url).scheme.lower() == "mysql":
        endpoint = MysqlEndpoint.from_url(url)
        return MysqlTarget(spark, endpoint, partitions=partitions, work_dir=directory / LOAD_DIR)
    return open_target(spark, url, partitions=partitions)


def run_catchup(
    spark: SparkSession,
    directory: str | Path,
    sink_url: str,
    progress: Progress | None = None,
    *,
    partitions: int = 4,
) -> dict[str, Any]:
    """Apply the range staged in ``directory`` to ``sink_url``; a summary of what was done."""
    report = progress or Progress()
    info = read_range(directory)
    report("planned", start_ts=info.start_ts, end_ts=info.end_ts, rows=info.rows)
    report.plan(t for t in info.tables if t.rows)
    target = _target(spark, sink_url, Path(directory), partitions)
    # the MySQL writer reads each DataFrame once: caching would cost more than it saves
    tables = plan(spark, directory, info, cache=not isinstance(target, MysqlTarget))
    try:
        applied = target.apply(info.start_ts, info.end_ts, tables, report)
        report.finish()
    finally:
        for tc in tables:
            if tc.changes is not None:
                tc.changes.unpersist()
    return {
        "start_ts": info.start_ts,
        "end_ts": info.end_ts,
        "row_changes": info.rows,
        "upserts": applied.upserts,
        "deletes": applied.deletes,
        "tables": len(tables),
    }


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m services.spark.catchup", description=__doc__)
    ap.add_argument("--staging", required=True, help="directory of the staged range")
    ap.add_argument("--sink", default=os.environ.get(SINK_ENV, ""), help=f"or ${SINK_ENV}")
    ap.add_argument("--master", default=None, help="Spark master (default: local[*])")
    ap.add_argument(
        "--partitions", type=int, default=4, help="parallel writers (CSV files per table)"
    )
    ap.add_argument("--driver-memory", default="1g")
    add_progress_arguments(ap)
    ap.add_argument(
        "--conf", action="append", default=[], metavar="K=V", help="a Spark setting (repeatable)"
    )
    k8s = ap.add_argument_group("k8s:// master (client mode: this process is the driver)")
    k8s.add_argument("--k8s-namespace", default="")
    k8s.add_argument("--k8s-image", default="", help="the executors' image")
    k8s.add_argument("--k8s-service-account", default="tributary-spark")
    k8s.add_argument("--k8s-staging-claim", default="", help="PVC the executors mount")
    k8s.add_argument("--k8s-staging-mount", default=STAGING_MOUNT, help="where they mount it")
    k8s.add_argument("--k8s-executors", type=int, default=2)
    k8s.add_argument("--k8s-executor-cores", type=int, default=1)
    k8s.add_argument("--k8s-executor-memory", default="1g")
    k8s.add_argument("--k8s-ca-file", default="", help="API server CA (default: in-cluster)")
    k8s.add_argument("--k8s-token-file", default="", help="bearer token (default: in-cluster)")
    k8s.add_argument("--k8s-driver-pod", default=os.environ.get("POD_NAME", ""))
    k8s.add_argument("--k8s-driver-host", default=os.environ.get("POD_IP", ""))
    return ap.parse_args(argv)


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    """The settings beyond the defaults: client mode's for a ``k8s://`` master (its executor
    pod template written beside the staging directory), then every ``--conf``."""
    conf: dict[str, str] = {}
    if (args.master or "").startswith("k8s://"):
        if not (args.k8s_namespace and args.k8s_image and args.k8s_driver_pod):
            raise JobError("a k8s:// master needs --k8s-namespace, --k8s-image, --k8s-driver-pod")
        if not args.k8s_driver_host:
            raise JobError("a k8s:// master needs --k8s-driver-host (or POD_IP)")
        sub = K8sSubmission(
            args.master,
            args.k8s_namespace,
            args.k8s_image,
            service_account=args.k8s_service_account,
            staging_claim=args.k8s_staging_claim,
            staging_mount=args.k8s_staging_mount,
            executors=args.k8s_executors,
            executor_cores=args.k8s_executor_cores,
            executor_memory=args.k8s_executor_memory,
            labels={"app.kubernetes.io/component": "catchup"},
            submit_ca_file=args.k8s_ca_file,
            submit_token_file=args.k8s_token_file,
        )
        staging = Path(args.staging).absolute()
        template = staging.with_name(staging.name + "-executor-pod.json")
        template.write_text(json.dumps(pod_template(sub)))
        conf |= client_conf(
            sub,
            driver_host=args.k8s_driver_host,
            driver_pod=args.k8s_driver_pod,
            template_path=str(template),
        )
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise JobError(f"--conf wants KEY=VALUE, not {item!r}")
        conf[key] = value
    return conf


def _stopped() -> int:
    """SIGTERM stopped the job (its session stopped: in k8s mode its executors deleted);
    nothing was committed, so a rerun may succeed."""
    print(json.dumps({"event": "failed", "error": "stopped by SIGTERM", "retriable": True}))
    return EXIT_RETRIABLE


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    if not args.sink:
        print(json.dumps({"event": "failed", "error": "no sink URL", "retriable": False}))
        return 1
    try:
        extra = spark_conf(args)
    except JobError as e:
        print(json.dumps({"event": "failed", "error": str(e), "retriable": False}))
        return 1
    with StopOnSigterm() as guard:
        spark = spark_session(
            "tributary-catchup", args.master, driver_memory=args.driver_memory, extra=extra
        )
        report = Progress(meter=open_meter("catch-up", args))
        context = spark.sparkContext
        report("session", master=context.master, app_id=context.applicationId)
        try:
            if guard.attach(spark):
                return _stopped()
            summary = run_catchup(
                spark, args.staging, args.sink, report, partitions=args.partitions
            )
        except (JobError, StagingError) as e:
            log.error("catch-up failed: %s", e)
            print(json.dumps({"event": "failed", "error": str(e), "retriable": e.retriable}))
            return EXIT_RETRIABLE if e.retriable else 1
        except Exception:
            if guard.requested.is_set():  # the session was stopped under the running job
                return _stopped()
            raise
        finally:
            stop_quietly(spark)
    print(json.dumps({"event": "done", **summary}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
