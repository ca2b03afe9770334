"""The SQLite sink's crash test history: bank transfers between accounts, each with a ledger row
carrying its commit ts, and the writer process that applies them (``python -m
tests.support.bank_sqlite PATH``), resuming a little before its checkpoint."""

from __future__ import annotations

import asyncio
import random
import sys

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks.sqlite.sink import SqliteSink

ACCOUNTS, START = 20, 1000


ACCT = TableInfo.build("bank", "acct", [("id", "int"), ("bal", "bigint")], ["id"])


LEDGER = TableInfo.build(
    "bank", "ledger", [("ts", "bigint"), ("src", "int"), ("dst", "int")], ["ts"]
)


BANK_DDL = [
    Txn(1, ddl=Ddl("bank", "CREATE DATABASE bank")),
    Txn(2, ddl=Ddl("bank", "CREATE TABLE acct (id INT PRIMARY KEY, bal BIGINT NOT NULL)")),
    Txn(3, ddl=Ddl("bank", "CREATE TABLE ledger (ts BIGINT PRIMARY KEY, src INT, dst INT)")),
    Txn(4, rows=tuple(RowChange.insert(ACCT, {"id": i, "bal": START}) for i in range(ACCOUNTS))),
]


def bank_txns() -> list[Txn]:
    """The deterministic history: setup, then transfers at commit ts 5, 6, 7, ..."""
    rng = random.Random(7)
    bal = [START] * ACCOUNTS
    out = list(BANK_DDL)
    for ts in range(5, 5 + 20_000):
        src, dst = rng.sample(range(ACCOUNTS), 2)
        amt = rng.randint(1, 50)
        rows = (
            RowChange.update(
                ACCT, {"id": src, "bal": bal[src]}, {"id": src, "bal": bal[src] - amt}
            ),
            RowChange.update(
                ACCT, {"id": dst, "bal": bal[dst]}, {"id": dst, "bal": bal[dst] + amt}
            ),
            RowChange.insert(LEDGER, {"ts": ts, "src": src, "dst": dst}),
        )
        bal[src] -= amt
        bal[dst] += amt
        out.append(Txn(ts, ts - 1, rows=rows))
    return out


async def bank_writer(path: str) -> None:
    """The crash test's writer process: resume a little before the checkpoint, apply forever."""
    history = bank_txns()
    rng = random.Random()
    async with await SqliteSink.open(path, cluster_id=1) as sink:
        resume = max(0, (await sink.checkpoint() or 0) - 7)  # overlap: replays must be skipped
        i = next(n for n, t in enumerate(history) if t.commit_ts > resume)
        while i < len(history):
            n = rng.randint(1, 40)
            await sink.apply(history[i : i + n])
            i += n


if __name__ == "__main__":
    asyncio.run(bank_writer(sys.argv[1]))
