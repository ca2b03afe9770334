"""The catch-up staging format: decoded row changes of a commit-ts range as Parquet.

The drainer writes it (``StagingWriter``) while it pulls a backlog; the Spark catch-up job
reads it. ``staging.format`` defines the layout, ``staging.writer`` writes it.

``StagingWriter`` is imported on first use: it needs pyarrow, which a drainer loads only when
a catch-up runs (pyarrow is in the ``spark`` extra).
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name == "StagingWriter":
        from tributary.staging.writer import StagingWriter

        return StagingWriter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
