"""The timestamp oracle (TSO), after PD's: HA through an etcd election, never backwards.

Modules: ``clock`` (Clock port), ``allocator`` (pure window/physical/logical
logic), ``window`` (the window in etcd, leader-guarded), ``member`` (campaign and
serve), ``service`` (gRPC edge), ``batching`` (coalescing ``get_ts()`` calls into one
request), ``client`` (the ``Tso`` port over our TSO) and ``pd_client`` (over PD).
"""

from tributary.tso.allocator import MAX_COUNT, TimestampAllocator, WindowStore
from tributary.tso.client import Tso, TsoClient
from tributary.tso.clock import Clock, ManualClock, SystemClock
from tributary.tso.errors import LogicalOverflow, NotLeader, TsoError
from tributary.tso.keys import LEADER_PREFIX, TIMESTAMP_KEY
from tributary.tso.member import MemberTiming, TsoMember
from tributary.tso.service import TsoService
from tributary.tso.window import KvWindowStore

__all__ = [
    "LEADER_PREFIX",
    "MAX_COUNT",
    "TIMESTAMP_KEY",
    "Clock",
    "KvWindowStore",
    "LogicalOverflow",
    "ManualClock",
    "MemberTiming",
    "NotLeader",
    "SystemClock",
    "TimestampAllocator",
    "Tso",
    "TsoClient",
    "TsoError",
    "TsoMember",
    "TsoService",
    "WindowStore",
]
