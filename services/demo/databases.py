"""The demo's reads and resets of the two databases outside the replication path.

:func:`clear_mysql` drops the demo's own databases (``demo_bank``, ``demo_mixed``) on a MySQL
side before a run, so a second run on the same server starts as the first did (the cluster,
its DDL history and its checkpoint are new every run; the tables must be too). SQLite sides
live in the data dir, which is wiped anyway. :func:`bank_total` reads the bank's invariant.

Invariant: nothing here touches a database other than the demo's two.
"""

from __future__ import annotations

import logging

from services.demo.endpoints import BANK_DB, DATABASES, is_mysql
from services.demo.errors import DemoError
from tributary.sinks.urls import redact
from tributary.sql import Statement
from tributary.workload import Upstream, WorkloadError, open_upstream, total_balance

log = logging.getLogger(__name__)


async def clear_mysql(url: str) -> list[str]:
    """Drop the demo's databases on the MySQL server ``url``; those that existed."""
    if not is_mysql(url):
        return []
    try:
        async with open_upstream(url, writers=1) as db:
            found = await _existing(db)
            for name in found:
                await db.execute_ddl(name, f"DROP DATABASE IF EXISTS `{name}`")
    except WorkloadError as e:
        raise DemoError(
            f"cannot drop the demo's databases on {redact(url)}: {e}", retriable=e.retriable
        ) from e
    return found


async def _existing(db: Upstream) -> list[str]:
    marks = ", ".join(["%s"] * len(DATABASES))
    async with db.session() as session:
        rows = await session.query(
            Statement(
                f"SELECT schema_name FROM information_schema.schemata "
                f"WHERE schema_name IN ({marks}) ORDER BY schema_name",
                DATABASES,
            )
        )
    return [str(r[0]) for r in rows]


async def bank_total(db: Upstream) -> int:
    """The sum of every ``demo_bank`` balance in ``db``; DemoError if it cannot be read."""
    try:
        return await total_balance(db, BANK_DB)
    except WorkloadError as e:
        raise DemoError(f"cannot read the bank total: {e}") from e


async def bank_total_at(url: str) -> int:
    """:func:`bank_total` of the database at ``url`` (opened for this one read)."""
    try:
        async with open_upstream(url, writers=1) as db:
            return await bank_total(db)
    except WorkloadError as e:
        raise DemoError(f"cannot open {redact(url)}: {e}") from e
