"""The DDL history: TiDB's DDL jobs keyed by job id, with the table info of each schema version.

A DDL binlog carries only a job id and the statement; the job (schema version, database or
table info in TiDB's job JSON shape) comes from a history source behind one port,
:class:`DdlHistory`: :class:`KvDdlHistory` keeps it in etcd for our writers (with
:class:`KvIdAllocator` for job ids, schema versions and table ids), and
:class:`TidbHttpDdlHistory` reads a real TiDB's ``/ddl/history``. Writers build TiDB-shaped
jobs with :func:`table_info`, :func:`add_column`, :func:`drop_column`, :func:`with_keys` and
:func:`ddl_job`. Shared by the drainer and the writers; it never imports a service.
"""

from tributary.ddlhistory.actions import NOT_REPLICATED, TABLE_CHANGES, Action
from tributary.ddlhistory.allocator import Counter, KvIdAllocator
from tributary.ddlhistory.build import add_column, ddl_job, drop_column, table_info, with_keys
from tributary.ddlhistory.errors import DdlHistoryError, JobConflict, MalformedJob, ReadOnlyHistory
from tributary.ddlhistory.jobjson import dumps_job, job_from_json, job_to_json, loads_job
from tributary.ddlhistory.kvstore import JOBS_PREFIX, KvDdlHistory, job_key
from tributary.ddlhistory.model import (
    ColumnInfo,
    DbInfo,
    DdlJob,
    IndexColumn,
    IndexInfo,
    JobState,
    SchemaState,
    TableInfo,
)
from tributary.ddlhistory.port import DdlHistory
from tributary.ddlhistory.tidb_http import TidbHttpDdlHistory
from tributary.ddlhistory.typename import mysql_type

__all__ = [
    "JOBS_PREFIX",
    "NOT_REPLICATED",
    "TABLE_CHANGES",
    "Action",
    "ColumnInfo",
    "Counter",
    "DbInfo",
    "DdlHistory",
    "DdlHistoryError",
    "DdlJob",
    "IndexColumn",
    "IndexInfo",
    "JobConflict",
    "JobState",
    "KvDdlHistory",
    "KvIdAllocator",
    "MalformedJob",
    "ReadOnlyHistory",
    "SchemaState",
    "TableInfo",
    "TidbHttpDdlHistory",
    "add_column",
    "ddl_job",
    "drop_column",
    "dumps_job",
    "job_from_json",
    "job_key",
    "job_to_json",
    "loads_job",
    "mysql_type",
    "table_info",
    "with_keys",
]
