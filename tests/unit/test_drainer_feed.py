"""A pump's inbox: bounded, and once full it takes puts again only when half empty."""

from __future__ import annotations

import asyncio

from services.drainer.feed import Inbox
from services.drainer.item import PulledBinlogItem


def item(ts: int) -> PulledBinlogItem:
    return PulledBinlogItem(ts, ts - 1, b"", False)


async def test_a_full_inbox_waits_until_half_empty_and_keeps_the_order() -> None:
    wake = asyncio.Event()
    inbox = Inbox(wake, size=4)
    for ts in range(1, 5):
        await inbox.put(item(ts))  # room: these do not wait
    assert wake.is_set() and inbox.qsize() == 4
    blocked = asyncio.create_task(inbox.put(item(5)), name="test-put")
    await asyncio.sleep(0.01)
    assert not blocked.done()
    taken = [inbox.take()]
    await asyncio.sleep(0.01)
    assert not blocked.done()  # 3 left: above half
    taken.append(inbox.take())
    await asyncio.wait_for(blocked, 5)  # 2 left: half
    while (next_item := inbox.take()) is not None:
        taken.append(next_item)
    assert [t.commit_ts for t in taken if t is not None] == [1, 2, 3, 4, 5]
    assert inbox.take() is None and inbox.qsize() == 0
