"""etcd keys of the TSO, in the tidb-binlog key space."""

from __future__ import annotations

LEADER_PREFIX = b"/tidb-binlog/v1/tso/leader/"
TIMESTAMP_KEY = b"/tidb-binlog/v1/tso/timestamp"
