"""The demo's pure parts, with in-process fakes: the bank codec, the load
generator's transaction protocol, and the verification's ability to fail.

(Pure logic, kept beside test_demo.py because these files belong to the demo.)
"""

from __future__ import annotations

import asyncio

import pytest

from services.demo.bank import (
    BankError,
    Change,
    Ledger,
    Row,
    decode_txn,
    encode_txn,
)
from services.demo.loadgen import Committed, LoadGenerator
from services.demo.verify import PumpFeed, Served, check
from tidbcodec import IntDatum, decode_inserted_row, encode_value
from tso.errors import TsoError
from wire.binlog import MutationType, PrewriteValue, TableMutation

OPEN_7 = (Change(None, Row(7, 1000)),)
MOVE_7_TO_8 = (Change(Row(7, 1000), Row(7, 900)), Change(Row(8, 50), Row(8, 150)))


# -- bank codec ----------------------------------------------------------------


def test_inserted_row_is_handle_then_every_column() -> None:
    value = PrewriteValue().parse(encode_txn(OPEN_7))
    (mutation,) = value.mutations
    assert mutation.table_id == 100
    assert mutation.sequence == [MutationType.Insert]
    row = mutation.inserted_rows[0]
    expected_tail = encode_value(IntDatum(1), IntDatum(7), IntDatum(2), IntDatum(1000))
    assert row == encode_value(IntDatum(7)) + expected_tail
    assert decode_inserted_row(row) == ([IntDatum(7)], {1: IntDatum(7), 2: IntDatum(1000)})


def test_transactions_round_trip() -> None:
    assert decode_txn(encode_txn(OPEN_7)) == OPEN_7
    assert decode_txn(encode_txn(MOVE_7_TO_8)) == MOVE_7_TO_8
    mixed = (*OPEN_7, Change(Row(9, 5), Row(9, 6)))
    assert decode_txn(encode_txn(mixed)) == mixed


def test_decode_rejects_what_is_not_a_bank_transaction() -> None:
    other_table = bytes(
        PrewriteValue(mutations=[TableMutation(table_id=5, inserted_rows=[b"\x00"])])
    )
    with pytest.raises(BankError):
        decode_txn(other_table)
    short = PrewriteValue().parse(encode_txn(MOVE_7_TO_8))
    short.mutations[0].updated_rows.pop()
    with pytest.raises(BankError):
        decode_txn(bytes(short))
    garbled = PrewriteValue().parse(encode_txn(OPEN_7))
    garbled.mutations[0].inserted_rows[0] = b"\xff\x01"
    with pytest.raises(BankError):
        decode_txn(bytes(garbled))


def test_ledger_refuses_changes_out_of_order() -> None:
    ledger = Ledger()
    with pytest.raises(BankError):
        ledger.apply(MOVE_7_TO_8)  # account 7 does not exist yet
    ledger.apply(OPEN_7)
    ledger.apply((Change(None, Row(8, 50)),))
    with pytest.raises(BankError):
        ledger.apply(OPEN_7)  # opened twice
    ledger.apply(MOVE_7_TO_8)
    with pytest.raises(BankError):
        ledger.apply(MOVE_7_TO_8)  # 7 is at 900 now, not 1000
    assert ledger.balances == {7: 900, 8: 150}
    assert ledger.total == 1050


# -- load generator ------------------------------------------------------------


class FakeTso:
    def __init__(self, fail_every: int = 0) -> None:
        self.last = 0
        self.calls = 0
        self.fail_every = fail_every

    async def get_ts(self) -> int:
        self.calls += 1
        if self.fail_every and self.calls % self.fail_every == 0:
            raise TsoError("no leader", retriable=True)
        await asyncio.sleep(0)
        self.last += 1
        return self.last


class RecordingWriter:
    """Keeps every binlog in arrival order, like a single pump would."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int, int]] = []  # (kind, start_ts, commit_ts)
        self.values: dict[int, bytes] = {}

    async def prewrite(
        self, start_ts: int, prewrite_value: bytes, prewrite_key: bytes = b""
    ) -> None:
        await asyncio.sleep(0)
        self.log.append(("P", start_ts, 0))
        self.values[start_ts] = prewrite_value

    async def commit(self, start_ts: int, commit_ts: int) -> None:
        self.log.append(("C", start_ts, commit_ts))

    async def rollback(self, start_ts: int) -> None:
        self.log.append(("R", start_ts, 0))


async def test_every_prewrite_is_followed_by_its_commit_or_rollback() -> None:
    tso, writer = FakeTso(fail_every=7), RecordingWriter()
    gen = LoadGenerator(tso, writer, writers=4, rollback_ratio=0.2, seed=1)
    await gen.run(0.05)

    prewrites = [s for kind, s, _ in writer.log if kind == "P"]
    ends = {s: kind for kind, s, _ in writer.log if kind in "CR"}
    assert prewrites and set(prewrites) == set(ends)  # nothing left dangling
    assert gen.stats.commits == sum(kind == "C" for kind in ends.values()) > 0
    assert gen.stats.failures > 0  # the TSO failed now and then...
    assert gen.stats.rollbacks + gen.stats.failures >= sum(k == "R" for k in ends.values())
    # ...and a failed commit ts turned into a rollback, never into a commit
    committed = {c.start_ts: c for c in gen.committed}
    assert set(committed) == {s for s, kind in ends.items() if kind == "C"}
    for kind, start_ts, commit_ts in writer.log:
        if kind == "C":
            assert committed[start_ts].commit_ts == commit_ts > start_ts
            assert decode_txn(writer.values[start_ts]) == committed[start_ts].changes

    # replaying the commits in commit-ts order rebuilds the books
    replay = Ledger()
    for c in sorted(gen.committed, key=lambda c: c.commit_ts):
        replay.apply(c.changes)
    assert replay.balances == gen.books.balances
    assert replay.total == 1000 * len(replay.balances)  # transfers conserve money


# -- verification ----------------------------------------------------------------

A = Committed(1, 2, OPEN_7)
B = Committed(3, 4, (Change(None, Row(8, 50)),))
C = Committed(5, 6, MOVE_7_TO_8)


def books(*commits: Committed) -> Ledger:
    ledger = Ledger()
    for c in commits:
        ledger.apply(c.changes)
    return ledger


def served(pump: str, c: Committed, *, commit_ts: int = 0, value: bytes = b"") -> Served:
    return Served(pump, c.start_ts, commit_ts or c.commit_ts, value or encode_txn(c.changes))


def feed(name: str, *items: Served, backwards: int = 0) -> PumpFeed:
    return PumpFeed(name, "127.0.0.1:1", list(items), fakes=1, position=99, backwards=backwards)


def test_check_passes_when_pumps_return_exactly_the_commits() -> None:
    v = check(
        [A, B, C],
        books(A, B, C),
        [feed("p1", served("p1", A), served("p1", C)), feed("p2", served("p2", B))],
    )
    assert v.ok
    assert (v.acked, v.served, v.found_once, v.rows_decoded) == (3, 3, 3, 4)
    assert v.per_pump == {"p1": 2, "p2": 1}
    assert v.replayed.balances == {7: 900, 8: 150}


def on_p1(*items: Served, backwards: int = 0) -> list[PumpFeed]:
    return [feed("p1", *items, backwards=backwards)]


P1_ALL = (served("p1", A), served("p1", B), served("p1", C))


@pytest.mark.parametrize(
    ("feeds", "problem"),
    [
        (on_p1(served("p1", A), served("p1", C)), "missing"),
        ([*on_p1(*P1_ALL), feed("p2", served("p2", B))], "duplicates"),
        (on_p1(*P1_ALL, Served("p1", 9, 10, b"")), "unexpected"),
        (on_p1(*P1_ALL[:2], served("p1", C, commit_ts=7)), "wrong_commit_ts"),
        (on_p1(*P1_ALL[:2], served("p1", C, value=encode_txn(OPEN_7))), "wrong_rows"),
        (on_p1(*P1_ALL, backwards=1), "backwards"),
        # C served before A (A with a wrong commit ts): money leaves an account not yet opened
        (on_p1(served("p1", C), served("p1", B), served("p1", A, commit_ts=8)), "replay_error"),
    ],
)
def test_check_fails_on_each_kind_of_loss_or_disorder(feeds: list[PumpFeed], problem: str) -> None:
    v = check([A, B, C], books(A, B, C), feeds)
    assert not v.ok
    assert getattr(v, problem)


def test_check_fails_when_a_pump_did_not_catch_up() -> None:
    lagging = feed("p2")
    lagging.error = "stream did not reach commit ts 6 within 60 s"
    v = check(
        [A, B, C],
        books(A, B, C),
        [feed("p1", served("p1", A), served("p1", B), served("p1", C)), lagging],
    )
    assert not v.ok
    assert v.feed_errors == ["p2: stream did not reach commit ts 6 within 60 s"]
