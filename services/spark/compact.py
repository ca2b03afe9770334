"""Key-level compaction of staged changes: the pure transform at the heart of catch-up.

Per primary-key value only the last change survives, last by ``(_commit_ts, _seq)``: a ``U``
row carries the key's final values, a ``D`` row is a tombstone (the key ends absent). Applying
the tombstones (DELETE by key) and then the upserts (REPLACE) to a downstream that agrees with
the upstream at the range's start gives the upstream at its end: every key the range touched
ends in its final state, and the keys it did not touch are not written at all.

Worked example, t(id PK, v), changes in order::

    (10,0,U,1,a) (10,1,U,2,b) (11,2,D,1,a) (12,3,U,2,c) (12,4,U,1,d) (13,5,D,3,x)

    id 1: U a, D, U d  -> (12,4,U,1,d)      upsert
    id 2: U b, U c     -> (12,3,U,2,c)      upsert
    id 3: D            -> (13,5,D,3,x)      tombstone (harmless if 3 is absent downstream)
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from tributary.staging.format import COMMIT_TS, META_COLUMNS, OP, OP_DELETE, OP_UPSERT, SEQ

_RANK = "_rank"


def compact(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """The last change of each key (same columns as ``changes``)."""
    if not key:
        raise ValueError("compaction needs a primary key")
    last_first = Window.partitionBy(*key).orderBy(F.col(COMMIT_TS).desc(), F.col(SEQ).desc())
    return (
        changes.withColumn(_RANK, F.row_number().over(last_first))
        .where(F.col(_RANK) == 1)
        .drop(_RANK)
    )


def upserts(compacted: DataFrame) -> DataFrame:
    """The rows that end present, without the staging columns."""
    cols = [c for c in compacted.columns if c not in META_COLUMNS]
    return compacted.where(F.col(OP) == OP_UPSERT).select(*cols)


def tombstones(compacted: DataFrame, key: Sequence[str]) -> DataFrame:
    """The keys that end absent."""
    return compacted.where(F.col(OP) == OP_DELETE).select(*key)
