"""The bank workload: transfers between accounts; the total balance never changes.

Table ``<db>.accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, updated_at DATETIME(3))``
with ``accounts`` rows of ``OPENING`` each, created in transactions of at most 500 rows. A
transfer locks its two accounts one at a time in random order (``SELECT ... FOR UPDATE``), so
concurrent transfers deadlock now and then, as real ones do; the loser is retried as a new
transaction. Invariant: every committed transfer moves money between two accounts and
``total_balance`` is ``accounts * OPENING`` upstream, and downstream once it caught up.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Awaitable, Callable

from tributary.sql import MYSQL, SQLITE, Dialect, table_name
from tributary.workload.columns import TableSpec, bigint, datetime
from tributary.workload.env import Env
from tributary.workload.errors import WorkloadError
from tributary.workload.txn import TxnContext

log = logging.getLogger(__name__)

TABLE = "accounts"
OPENING = 1000
BATCH = 500
SPEC = TableSpec(
    TABLE,
    (bigint("id", not_null=True), bigint("balance", not_null=True), datetime("updated_at", 3)),
    primary_key=("id",),
)


def total_balance_sql(dialect: Dialect, schema: str = "bank") -> str:
    """The invariant query, for MySQL (``bank.accounts``) or SQLite (``bank__accounts``)."""
    return (
        f"SELECT COALESCE(SUM(balance), 0) FROM {table_name(dialect, schema, TABLE, params=False)}"
    )


MYSQL_TOTAL, SQLITE_TOTAL = total_balance_sql(MYSQL), total_balance_sql(SQLITE)


def _now_ms(clock: Callable[[], dt.datetime]) -> dt.datetime:
    now = clock()
    return now.replace(microsecond=now.microsecond // 1000 * 1000, tzinfo=None)


class Bank:
    def __init__(
        self,
        schema: str = "bank",
        *,
        accounts: int = 1000,
        max_amount: int = 100,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        if accounts < 2:
            raise ValueError("a bank needs at least two accounts")
        self.schema = schema
        self.accounts = accounts
        self._max_amount = max_amount
        self._clock = clock
        self._table_id = 0

    @property
    def expected_total(self) -> int:
        return self.accounts * OPENING

    async def setup(self, env: Env) -> None:
        if env.catalog.database(self.schema) is None:
            await env.ddl.create_database(self.schema)
        table = env.catalog.table(self.schema, TABLE)
        if table is None:
            table = await env.ddl.create_table(self.schema, SPEC)
        self._table_id = table.id
        opened = 0

        async def count(ctx: TxnContext) -> None:
            nonlocal opened
            top = await ctx.max(ctx.table(self._table_id), "id")
            opened = top if isinstance(top, int) else 0

        await env.txns.run([table.id], count)
        self.accounts = max(self.accounts, opened)  # a restart finds the accounts it opened
        for first in range(opened + 1, self.accounts + 1, BATCH):
            last = min(first + BATCH - 1, self.accounts)
            if not await env.txns.run([table.id], self._opener(first, last)):
                raise WorkloadError(f"could not open accounts {first}..{last}")
        log.info("bank %s ready: %d accounts", self.schema, self.accounts)

    def _opener(self, first: int, last: int) -> Callable[[TxnContext], Awaitable[None]]:
        async def open_accounts(ctx: TxnContext) -> None:
            now = _now_ms(self._clock)
            rows = [
                {"id": i, "balance": OPENING, "updated_at": now} for i in range(first, last + 1)
            ]
            await ctx.insert(ctx.table(self._table_id), rows)

        return open_accounts

    async def step(self, env: Env, rng: random.Random) -> None:
        a, b = rng.sample(range(1, self.accounts + 1), 2)
        wanted = rng.randint(1, self._max_amount)

        async def transfer(ctx: TxnContext) -> None:
            table = ctx.table(self._table_id)
            src = await ctx.get(table, {"id": a})
            dst = await ctx.get(table, {"id": b})
            if src is None or dst is None:
                raise WorkloadError(f"account {a if src is None else b} is missing")
            balance, other = src["balance"], dst["balance"]
            if not isinstance(balance, int) or not isinstance(other, int):
                raise WorkloadError(f"accounts {a}, {b}: balances {balance!r}, {other!r}")
            amount = min(wanted, balance)
            if amount == 0:
                return
            now = _now_ms(self._clock)
            await ctx.update(table, src, {**src, "balance": balance - amount, "updated_at": now})
            await ctx.update(table, dst, {**dst, "balance": other + amount, "updated_at": now})

        await env.txns.run([self._table_id], transfer)
