"""The catch-up staging format: decoded row changes of a commit-ts range as Parquet.

The drainer writes it (``StagingWriter``) while it pulls a backlog; the Spark catch-up job
reads it. ``staging.format`` defines the layout, ``staging.writer`` writes it.
"""

from tributary.staging.format import (
    COMMIT_TS,
    OP,
    OP_DELETE,
    OP_UPSERT,
    SEQ,
    RangeInfo,
    StagedTable,
    StagingError,
    arrow_kind,
    read_range,
)
from tributary.staging.writer import StagingWriter

__all__ = [
    "COMMIT_TS",
    "OP",
    "OP_DELETE",
    "OP_UPSERT",
    "SEQ",
    "RangeInfo",
    "StagedTable",
    "StagingError",
    "StagingWriter",
    "arrow_kind",
    "read_range",
]
