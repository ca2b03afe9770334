"""Coordination store: the narrow key-value port every component uses for etcd.

Domain code depends on :class:`coord.kv.Kv` only. ``coord.etcd`` implements it
over a real etcd (aetcd); ``coord.memory`` is an in-memory fake for unit tests
of pure logic. Both pass the same contract suite (``tests/contract``).
"""

from tributary.coord.kv import (
    CompareOp,
    KeyValue,
    Kv,
    KvError,
    Lease,
    WatchEvent,
    WatchEventKind,
)

__all__ = ["CompareOp", "KeyValue", "Kv", "KvError", "Lease", "WatchEvent", "WatchEventKind"]
