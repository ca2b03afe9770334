"""The timestamp oracle (TSO), after PD's: HA through an etcd election, never backwards.

Modules: ``clock`` (Clock port), ``allocator`` (pure window/physical/logical
logic), ``window`` (the window in etcd, leader-guarded), ``member`` (campaign and
serve), ``service`` (gRPC edge), ``client`` (the ``Tso`` port, batching client).
"""

from tso.allocator import MAX_COUNT, TimestampAllocator, WindowStore
from tso.client import Tso, TsoClient
from tso.clock import Clock, ManualClock, SystemClock
from tso.errors import LogicalOverflow, NotLeader, TsoError
from tso.keys import LEADER_PREFIX, TIMESTAMP_KEY
from tso.member import MemberTiming, TsoMember
from tso.service import TsoService
from tso.window import KvWindowStore

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
