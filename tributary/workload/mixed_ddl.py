"""The DDL of the mixed workload: one applicable statement picked at random per DDL step.

Kinds: CREATE TABLE (a new ``dyn_*`` table shaped like ``sbtest`` or ``composite``, while
there are fewer than ``max_tables``), ADD COLUMN (NOT NULL with a default, or nullable),
ADD INDEX (on a column not indexed yet, of an indexable type), DROP COLUMN (a column outside
every key and index, leaving at least three), TRUNCATE TABLE, RENAME TABLE and DROP TABLE (of
``dyn_*`` tables only, so the base tables keep the load varied). Every DDL goes through
``workload.ddl.DdlRunner``, which keeps DML off the table while it runs. A DDL that no longer
applies when its turn comes (its table or column went meanwhile) counts as aborted, one the
upstream refused as a failure; one that ran but could not be recorded (``HistoryDiverged``)
stops the workload.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import random
from collections.abc import Awaitable, Callable

from tributary.tidbcodec import mysqltypes as mt
from tributary.workload import columns as c
from tributary.workload.catalog import Table
from tributary.workload.env import Env
from tributary.workload.errors import Abort, HistoryDiverged, WorkloadError
from tributary.workload.mixed_tables import SHAPES, key_columns

log = logging.getLogger(__name__)

Ddl = Callable[[], Awaitable[object]]
_NOT_INDEXABLE = frozenset(
    {
        mt.TYPE_JSON,
        mt.TYPE_BLOB,
        mt.TYPE_TINY_BLOB,
        mt.TYPE_MEDIUM_BLOB,
        mt.TYPE_LONG_BLOB,
        mt.TYPE_GEOMETRY,
    }
)
_NEW_COLUMNS: tuple[Callable[[str], c.ColumnSpec], ...] = (
    lambda name: c.int_(name, not_null=True, default="7"),
    lambda name: c.varchar(name, 16, default="'new'"),
    lambda name: c.datetime(name, 3),
    lambda name: c.decimal(name, 8, 2),
)


def _indexed(table: Table) -> set[str]:
    return {ic.name for i in table.info.indices for ic in i.columns}


class DdlChooser:
    def __init__(self, schema: str, max_tables: int) -> None:
        self._schema = schema
        self._max_tables = max_tables
        self._names = itertools.count(1)

    def _fresh(self, env: Env, base: str, rng: random.Random) -> str:
        while True:
            name = f"{base}_{rng.getrandbits(20):05x}"
            if env.catalog.table(self._schema, name) is None:
                return name

    def choices(self, env: Env, rng: random.Random) -> list[tuple[str, Ddl]]:
        """Every DDL that applies now, each with a name for the logs."""
        schema, ddl = self._schema, env.ddl
        tables = env.catalog.tables(schema)
        out: list[tuple[str, Ddl]] = []
        if len(tables) < self._max_tables:
            spec = dataclasses.replace(rng.choice(SHAPES), name=self._fresh(env, "dyn", rng))
            out.append(("create table", lambda: ddl.create_table(schema, spec)))
        if not tables:
            return out
        t = rng.choice(tables)
        if len(t.info.columns) < 24:
            column = rng.choice(_NEW_COLUMNS)(f"c{next(self._names)}_{rng.getrandbits(16):04x}")
            out.append(("add column", lambda: ddl.add_column(t, column)))
        keys, indexed = key_columns(t), _indexed(t)
        plain = [col for col in t.info.columns if col.name not in keys]
        indexable = [
            col
            for col in plain
            if col.name not in indexed
            and col.ft.tp not in _NOT_INDEXABLE
            and not (col.ft.tp in mt.STRING_TYPES and col.ft.flen > 255)
        ]
        if indexable:
            col = rng.choice(indexable)
            out.append(("add index", lambda: ddl.add_index(t, f"idx_{col.name}", (col.name,))))
        droppable = [col for col in plain if col.name not in indexed]
        if droppable and len(t.info.columns) > 3:
            gone = rng.choice(droppable).name
            out.append(("drop column", lambda: ddl.drop_column(t, gone)))
        if rng.random() < 0.3:
            out.append(("truncate table", lambda: ddl.truncate_table(t)))
        new_name = self._fresh(env, t.name.split("_r_")[0] + "_r", rng)
        out.append(("rename table", lambda: ddl.rename_table(t, new_name)))
        if t.name.startswith("dyn"):
            out.append(("drop table", lambda: ddl.drop_table(t)))
        return out

    async def run_one(self, env: Env, rng: random.Random) -> None:
        choices = self.choices(env, rng)
        if not choices:
            return
        what, ddl = rng.choice(choices)
        try:
            await ddl()
        except HistoryDiverged:
            raise
        except Abort as e:
            env.stats.aborted += 1
            log.info("mixed workload: %s no longer applies: %s", what, e)
        except WorkloadError as e:
            env.stats.failures += 1
            log.warning("mixed workload: %s did not run: %s", what, e)
