"""Every partition of the arbiter's topic, put together by commit ts, a whole ts at a time.

tidb-binlog's layout (one message per transaction, partition 0) needs nothing: each message is a
transaction, in commit-ts order. With the drainer's ``kafka-partition-by`` or
``kafka-message-per = row`` a transaction is several messages (one per partition touched, or
per row) with the same commit ts, a DDL is on every partition, and only each partition is in
commit-ts order. The merge keeps each partition's messages in a queue and hands out the
messages of the smallest commit ts T queued, of every partition together, once no message at or
below T can still come: every partition either has a message above T queued, or is read to its
end. Example, 2 partitions: p0 = [10, 30], p1 = [10, 20]: hand out 10 (both parts), then 20
(p0 holds 30), then 30 only once p1 holds something above 30 or is read to its end.

A partition read to its end holds everything its writer had committed: with the drainer's
``kafka-exactly-once`` a batch becomes visible on all its partitions at once (read_committed),
so a transaction is never handed out in part; at-least-once, a part still in flight when the
other parts were read would come after its ts was applied (the drainer sends all parts of a
batch before it waits for the acks, so the window is that of one batch in flight).

A message that does not decode has no commit ts: it is handed out as soon as it heads its
queue, so the syncer stops on it (or skips it) at its place. One that does is handed out with
its transaction (``Record.txn``): each message is decoded once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from services.arbiter.errors import MalformedMessage
from services.arbiter.reader import TopicReader
from services.arbiter.syncer import Record
from tributary.change import Txn


class PartitionMerge:
    def __init__(self, reader: TopicReader, decode: Callable[[Record], Txn]) -> None:
        self.topic = reader.topic
        self._reader = reader
        self._decode = decode  # MalformedMessage for a message that does not decode
        self._queues: dict[int, deque[tuple[int, Record]]] = {p: deque() for p in reader.partitions}

    async def fetch(self, max_records: int, wait: float) -> list[Record]:
        for r in await self._reader.fetch(max_records, wait):
            try:
                txn = self._decode(r)
            except MalformedMessage:
                self._queues[r.partition].append((-1, r))
                continue
            decoded = Record(r.offset, r.value, r.partition, txn)
            self._queues[r.partition].append((txn.commit_ts, decoded))
        out: list[Record] = []
        ends: dict[int, int] | None = None
        while len(out) < max_records:
            heads = [q[0][0] for q in self._queues.values() if q]
            if not heads:
                break
            ts = min(heads)
            if ts >= 0:
                waiting = [p for p, q in self._queues.items() if not q or q[-1][0] <= ts]
                if waiting:
                    ends = ends or await self._reader.ends()
                    if any([await self._reader.position(p) < ends[p] for p in waiting]):
                        break  # a message at or below ts may still be read there
            for q in self._queues.values():
                while q and q[0][0] == ts:
                    out.append(q.popleft()[1])
        return out
