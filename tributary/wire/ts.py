"""TSO timestamp layout shared with TiDB/PD: ``physical_ms << 18 | logical``."""

from __future__ import annotations

LOGICAL_BITS = 18
MAX_LOGICAL = 1 << LOGICAL_BITS


def compose(physical_ms: int, logical: int) -> int:
    """Build a timestamp from milliseconds since the epoch and a logical counter."""
    if not 0 <= logical < MAX_LOGICAL:
        raise ValueError(f"logical part {logical} out of range")
    return (physical_ms << LOGICAL_BITS) | logical


def physical_ms(ts: int) -> int:
    """Milliseconds since the epoch encoded in ``ts``."""
    return ts >> LOGICAL_BITS


def logical(ts: int) -> int:
    return ts & (MAX_LOGICAL - 1)


def from_seconds(seconds: float) -> int:
    """The smallest timestamp at wall-clock time ``seconds`` (logical 0)."""
    return compose(int(seconds * 1000), 0)
