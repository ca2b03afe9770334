"""The checkpoint row's JSON, as tidb-binlog's drainer writes it into ``tidb_binlog.checkpoint``.

``{"consistent": bool, "commitTS": int, "ts-map": {...}, "schema-version": int}``, keyed by the
upstream cluster ID. ``consistent`` is true when the downstream holds exactly the transactions up
to ``commitTS`` (our SQL sinks write batch and checkpoint in one transaction, so it always is);
a Go drainer reading a false one would replay its relay log first.

The row lives in ``tidb_binlog.checkpoint`` on MySQL (``tidb_binlog__checkpoint`` on SQLite);
``checkpoint_setup``, ``checkpoint_save`` and ``checkpoint_load`` give the SQL that creates,
writes and reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tributary.sinks.port import SinkError
from tributary.sql import Dialect, Statement, quote, table_name

CHECKPOINT_SCHEMA = "tidb_binlog"
CHECKPOINT_TABLE = "checkpoint"
_INT64 = 1 << 63


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    commit_ts: int
    consistent: bool = True
    schema_version: int = 0
    ts_map: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "consistent": self.consistent,
                "commitTS": self.commit_ts,
                "ts-map": self.ts_map,
                "schema-version": self.schema_version,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> CheckpointRecord:
        """Parse a stored checkpoint; missing optional keys take their defaults."""
        try:
            doc: Any = json.loads(text)
            commit_ts = doc["commitTS"]
            ts_map = doc.get("ts-map") or {}
            record = cls(
                commit_ts=int(commit_ts),
                consistent=bool(doc.get("consistent", False)),
                schema_version=int(doc.get("schema-version", 0)),
                ts_map={str(k): int(v) for k, v in ts_map.items()},
            )
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SinkError(f"unreadable checkpoint {text[:200]!r}: {e}") from e
        if isinstance(commit_ts, bool) or not isinstance(commit_ts, int) or commit_ts < 0:
            raise SinkError(f"checkpoint commitTS is not a timestamp: {text[:200]!r}")
        return record


def checkpoint_setup(
    d: Dialect, schema: str = CHECKPOINT_SCHEMA, table: str = CHECKPOINT_TABLE
) -> list[str]:
    """Create the checkpoint table if missing (tidb-binlog's definition on MySQL)."""
    name = table_name(d, schema, table, params=False)
    if d.schemas:
        return [
            f"CREATE SCHEMA IF NOT EXISTS {quote(d, schema, params=False)}",
            f"CREATE TABLE IF NOT EXISTS {name}"
            "(clusterID bigint unsigned primary key, checkPoint MEDIUMTEXT)",
        ]
    return [f"CREATE TABLE IF NOT EXISTS {name}(clusterID INTEGER PRIMARY KEY, checkPoint TEXT)"]


def _cluster_key(d: Dialect, cluster_id: int) -> int:
    # SQLite integers are signed 64-bit: a uint64 cluster ID is stored in two's complement.
    return cluster_id - (1 << 64) if not d.schemas and cluster_id >= _INT64 else cluster_id


def checkpoint_save(
    d: Dialect,
    cluster_id: int,
    record_json: str,
    schema: str = CHECKPOINT_SCHEMA,
    table: str = CHECKPOINT_TABLE,
) -> Statement:
    return Statement(
        f"REPLACE INTO {table_name(d, schema, table)} VALUES ({d.placeholder},{d.placeholder})",
        (_cluster_key(d, cluster_id), record_json),
    )


def checkpoint_load(
    d: Dialect, cluster_id: int, schema: str = CHECKPOINT_SCHEMA, table: str = CHECKPOINT_TABLE
) -> Statement:
    return Statement(
        f"SELECT checkPoint FROM {table_name(d, schema, table)} WHERE clusterID = {d.placeholder}",
        (_cluster_key(d, cluster_id),),
    )
