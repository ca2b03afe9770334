"""The mixed workload: sysbench-like DML over tables of many shapes and types, with DDL.

Base tables (in database ``<db>``):

* ``sbtest``    id BIGINT PK (the row handle), k INT (indexed), c VARCHAR(120) UNIQUE, pad CHAR(60);
* ``nopk``      no primary key, u BIGINT NOT NULL UNIQUE, name, qty;
* ``alltypes``  id BIGINT PK and one column of each type: decimal, datetime(3), timestamp(6),
  date, time(2), year, enum, set, bit(12), json, blob, float, double, bigint unsigned,
  varbinary, text;
* ``composite`` a two-column primary key (n, region): not a handle in TiDB.

A transaction changes 1..10 rows of one or two tables: inserts, updates (of an integer
primary key too, now and then; keys of the other tables never change, see ``sinks.pump.rows``)
and deletes. With probability ``ddl_ratio`` a step is a DDL instead (``workload.mixed_ddl``).
Each table has a locator column (first primary or unique key column, an integer) from which
new keys are drawn (a per-table counter starting after the largest key) and rows are picked
(``locator >= random`` locked, in order).
"""

from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass

from tributary.sinks.pump.values import Value
from tributary.tidbcodec import mysqltypes as mt
from tributary.workload.catalog import Table
from tributary.workload.env import Env
from tributary.workload.mixed_ddl import DdlChooser
from tributary.workload.mixed_tables import BASE, REGIONS, key_columns, locator
from tributary.workload.rows import Row
from tributary.workload.txn import Body, TxnContext
from tributary.workload.values import random_value, word

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MixedOptions:
    ddl_ratio: float = 0.02  # share of steps that run a DDL instead of a transaction
    initial_rows: int = 50  # rows inserted into each base table at setup
    max_rows: int = 10  # rows changed by one transaction, at most
    max_tables: int = 8  # CREATE TABLE mid-stream stops at this many tables


class Mixed:
    def __init__(self, schema: str = "mixed", options: MixedOptions | None = None) -> None:
        self.schema = schema
        self.options = options or MixedOptions()
        self._next: dict[int, int] = {}  # table id -> last key handed out
        self._unique = itertools.count(1)
        self.ddl = DdlChooser(schema, self.options.max_tables)

    async def setup(self, env: Env) -> None:
        if env.catalog.database(self.schema) is None:
            await env.ddl.create_database(self.schema)
        for spec in BASE:
            table = env.catalog.table(self.schema, spec.name)
            if table is None:
                table = await env.ddl.create_table(self.schema, spec)
                rng = random.Random(table.id)
                for _ in range(0, self.options.initial_rows, 10):
                    await env.txns.run([table.id], self._inserts(table.id, 10, rng))
        log.info("mixed %s ready: %d tables", self.schema, len(env.catalog.tables(self.schema)))

    def _inserts(self, table_id: int, n: int, rng: random.Random) -> Body:
        async def body(ctx: TxnContext) -> None:
            table = ctx.table(table_id)
            await ctx.insert(table, [await self.new_row(ctx, table, rng) for _ in range(n)])

        return body

    async def step(self, env: Env, rng: random.Random) -> None:
        if rng.random() < self.options.ddl_ratio:
            await self.ddl.run_one(env, rng)
            return
        tables = env.catalog.tables(self.schema)
        if not tables:
            return
        chosen = rng.sample(tables, min(len(tables), rng.choice((1, 1, 2))))
        ops = [
            (rng.choice(chosen).id, rng.choice(("insert", "insert", "update", "update", "delete")))
            for _ in range(rng.randint(1, self.options.max_rows))
        ]

        async def body(ctx: TxnContext) -> None:
            for table_id, op in ops:
                await self._op(ctx, ctx.table(table_id), op, rng)

        await env.txns.run([t.id for t in chosen], body)

    async def _top(self, ctx: TxnContext, table: Table) -> int:
        if table.id not in self._next:
            top = await ctx.max(table, locator(table))
            self._next.setdefault(table.id, top if isinstance(top, int) else 0)
        return self._next[table.id]

    async def new_key(self, ctx: TxnContext, table: Table) -> int:
        top = await self._top(ctx, table)
        self._next[table.id] = top + 1
        return top + 1

    async def new_row(self, ctx: TxnContext, table: Table, rng: random.Random) -> Row:
        loc, keys = locator(table), key_columns(table)
        row: Row = {}
        for col in table.info.row_columns:
            if col.name == loc:
                row[col.name] = await self.new_key(ctx, table)
            elif col.name == "region":
                row[col.name] = rng.choice(REGIONS)
            elif col.name in keys:
                row[col.name] = self.unique_value(col.ft, rng)
            else:
                row[col.name] = random_value(rng, col)
        return row

    def unique_value(self, ft: mt.ColumnType, rng: random.Random) -> Value:
        n = next(self._unique)
        if ft.tp in mt.INTEGER_TYPES:
            return n
        return f"{n}-{word(rng, 8)}"[: max(ft.flen, 8)]

    async def _op(self, ctx: TxnContext, table: Table, op: str, rng: random.Random) -> None:
        if op == "insert":
            await ctx.insert(table, [await self.new_row(ctx, table, rng)])
            return
        loc = locator(table)
        top = await self._top(ctx, table)
        found = await ctx.scan(table, loc, rng.randint(0, top), 1) or await ctx.scan(
            table, loc, -(1 << 62), 1
        )
        if not found:
            await ctx.insert(table, [await self.new_row(ctx, table, rng)])
            return
        old = found[0]
        if op == "delete":
            await ctx.delete(table, old)
            return
        await ctx.update(table, old, await self._changed(ctx, table, old, rng))

    async def _changed(self, ctx: TxnContext, table: Table, old: Row, rng: random.Random) -> Row:
        new = dict(old)
        keys = key_columns(table)
        free = [col for col in table.info.row_columns if col.name not in keys]
        for col in rng.sample(free, min(len(free), rng.randint(1, 3))):
            new[col.name] = random_value(rng, col)
        if table.info.pk_is_handle and rng.random() < 0.1:  # a new row handle
            new[locator(table)] = await self.new_key(ctx, table)
        if table.info.pk_is_handle:
            for col in table.info.row_columns:
                if col.name in keys and not col.has_pk_flag and rng.random() < 0.1:
                    new[col.name] = self.unique_value(col.ft, rng)
        return new
