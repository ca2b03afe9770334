"""The checkpoint row's JSON, as tidb-binlog's drainer writes it into ``tidb_binlog.checkpoint``.

``{"consistent": bool, "commitTS": int, "ts-map": {...}, "schema-version": int}``, keyed by the
upstream cluster ID. ``consistent`` is true when the downstream holds exactly the transactions up
to ``commitTS`` (our SQL sinks write batch and checkpoint in one transaction, so it always is);
a Go drainer reading a false one would replay its relay log first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tributary.sinks.port import SinkError


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
