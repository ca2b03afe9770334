"""``PulledBinlogItem``: one binlog as the drainer pulled it from a pump.

It is the unit that flows puller -> merger -> sink: the pump's payload (a
marshalled ``binlog.Binlog``: a commit carrying its prewrite's value and DDL
fields, or a fake binlog) with the header fields read once by ``wire.peek``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PulledBinlogItem:
    commit_ts: int
    start_ts: int
    payload: bytes
    is_fake: bool
