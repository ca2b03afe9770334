"""Reading back what the load generator wrote, the way a drainer would, and checking it.

:func:`pull_all` streams ``binlog.Pump/PullBinlogs`` from every pump after
commit ts 0 until each stream has passed the newest acknowledged commit ts.
Fake binlogs (written by an idle pump, their ts taken from the TSO after the
load stopped) are what carry a quiet pump's stream past that point, so a
stream that got there has served everything it will ever serve below it.

:func:`check` merges the streams by commit ts and proves, for the acknowledged
commits: each was served exactly once, with its commit ts, its prewrite's rows
decode with tidbcodec to exactly the rows written, every stream was in
commit-ts order, and replaying the merged stream rebuilds the writers' books
(each update must start from the balance the previous commit left). Example:
pump-1 serves commits at ts 10 and 30, pump-2 at 20; the merge is 10, 20, 30;
if 20 moved account 7 from 1000 to 900 and 30 moves it from 900 to 850, the
replay accepts 30 only after 20: any other order is reported.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections import Counter
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import cast

from grpclib.client import Channel
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError

from services.demo.bank import BankError, Ledger, decode_txn
from services.demo.loadgen import Committed
from wire.binlog import Binlog, Pos, PullBinlogReq, PullBinlogResp, PumpStub
from wire.peek import MalformedBinlog, peek

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Served:
    """One commit binlog a pump served, its prewrite's value attached."""

    pump: str
    start_ts: int
    commit_ts: int
    prewrite_value: bytes


@dataclass
class PumpFeed:
    """What one pump's PullBinlogs stream delivered."""

    name: str
    addr: str
    binlogs: list[Served] = field(default_factory=list)
    fakes: int = 0
    position: int = 0  # highest commit ts seen, fake binlogs included
    backwards: int = 0  # binlogs whose commit ts was not above the previous one
    error: str = ""


async def pull_all(
    pumps: Sequence[tuple[str, str]], cluster_id: int, upto: int, limit: float
) -> list[PumpFeed]:
    """Pull every ``(name, addr)`` pump until its stream passes ``upto``, for at most
    ``limit`` seconds (then the feeds that fell short carry an error)."""
    feeds = [PumpFeed(name, addr) for name, addr in pumps]
    try:
        async with asyncio.timeout(limit), asyncio.TaskGroup() as tg:
            for feed in feeds:
                tg.create_task(_pull(feed, cluster_id, upto), name=f"demo-pull-{feed.name}")
    except TimeoutError:
        for feed in feeds:
            if feed.position < upto and not feed.error:
                feed.error = f"stream did not reach commit ts {upto} within {limit:.0f} s"
    return feeds


async def _pull(feed: PumpFeed, cluster_id: int, upto: int) -> None:
    host, _, port = feed.addr.rpartition(":")
    channel = Channel(host, int(port))
    request = PullBinlogReq(cluster_id=cluster_id, start_from=Pos(offset=0))
    try:
        responses = cast(
            AsyncGenerator[PullBinlogResp, None], PumpStub(channel).pull_binlogs(request)
        )
        async with aclosing(responses) as stream:
            async for resp in stream:
                _take(feed, resp.entity.payload)
                if feed.position >= upto:
                    return
        feed.error = "stream ended early"
    except (GRPCError, StreamTerminatedError, ProtocolError, OSError, MalformedBinlog) as e:
        feed.error = f"pull failed: {e!r}"
        log.warning("pulling %s failed: %r", feed.name, e)
    finally:
        channel.close()


def _take(feed: PumpFeed, payload: bytes) -> None:
    header = peek(payload)
    if header.commit_ts <= feed.position:
        feed.backwards += 1
    feed.position = max(feed.position, header.commit_ts)
    if header.is_fake:
        feed.fakes += 1
        return
    binlog = Binlog().parse(payload)
    feed.binlogs.append(Served(feed.name, binlog.start_ts, binlog.commit_ts, binlog.prewrite_value))


@dataclass
class Verdict:
    acked: int  # commits the load generator had acknowledged
    served: int  # commit binlogs the pumps served (fake binlogs not counted)
    per_pump: dict[str, int]
    fakes: dict[str, int]
    found_once: int = 0
    rows_decoded: int = 0
    missing: list[int] = field(default_factory=list)  # start ts, for each list below
    duplicates: list[int] = field(default_factory=list)
    unexpected: list[int] = field(default_factory=list)
    wrong_commit_ts: list[int] = field(default_factory=list)
    wrong_rows: list[str] = field(default_factory=list)  # "start_ts: why"
    backwards: int = 0
    replay_error: str = ""
    replayed: Ledger = field(default_factory=Ledger)
    books_match: bool = False
    feed_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        problems = (
            self.missing,
            self.duplicates,
            self.unexpected,
            self.wrong_commit_ts,
            self.wrong_rows,
            self.feed_errors,
        )
        return (
            not any(problems)
            and not self.backwards
            and not self.replay_error
            and self.books_match
            and self.found_once == self.acked
        )


def check(committed: Sequence[Committed], books: Ledger, feeds: Sequence[PumpFeed]) -> Verdict:
    """Compare what the pumps served with what was acknowledged (see the module docstring)."""
    acked = {c.start_ts: c for c in committed}
    merged = list(heapq.merge(*(f.binlogs for f in feeds), key=lambda s: s.commit_ts))
    verdict = Verdict(
        acked=len(acked),
        served=len(merged),
        per_pump={f.name: len(f.binlogs) for f in feeds},
        fakes={f.name: f.fakes for f in feeds},
        backwards=sum(f.backwards for f in feeds),
        feed_errors=[f"{f.name}: {f.error}" for f in feeds if f.error],
    )
    times = Counter(s.start_ts for s in merged)
    verdict.missing = sorted(ts for ts in acked if ts not in times)
    verdict.duplicates = sorted(ts for ts, n in times.items() if n > 1 and ts in acked)
    verdict.unexpected = sorted(ts for ts in times if ts not in acked)
    verdict.found_once = sum(1 for ts in acked if times[ts] == 1)
    replayed: set[int] = set()
    for served in merged:
        expected = acked.get(served.start_ts)
        if expected is None or served.start_ts in replayed:
            continue  # reported above as unexpected or duplicate
        replayed.add(served.start_ts)
        if served.commit_ts != expected.commit_ts:
            verdict.wrong_commit_ts.append(served.start_ts)
        try:
            changes = decode_txn(served.prewrite_value)
        except BankError as e:
            verdict.wrong_rows.append(f"{served.start_ts}: {e}")
            continue
        verdict.rows_decoded += len(changes)
        if changes != expected.changes:
            verdict.wrong_rows.append(f"{served.start_ts}: rows differ from those written")
            continue
        if not verdict.replay_error:
            try:
                verdict.replayed.apply(changes)
            except BankError as e:
                verdict.replay_error = f"commit ts {served.commit_ts}: {e}"
    verdict.books_match = verdict.replayed.balances == books.balances
    return verdict
