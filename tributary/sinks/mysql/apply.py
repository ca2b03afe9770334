"""The steps the MySQL sink is made of: a stretch of row transactions in one downstream
transaction, a DDL on its own (once, by its record: ``ddlmark``), and finding which upstream
transaction a failure belongs to.

Invariant: ``apply_stretch`` commits the stretch's rows and its checkpoint row together or
neither; every error leaves as a ``SinkError``, retriable by error code, and a non-retriable
one names the commit ts of the transaction that failed (found by replaying the stretch one
transaction at a time, uncompacted, in a transaction that is rolled back), or the stretch's
commit ts range when no single transaction fails on its own. A transaction the downstream
refuses for its size is a ``TxnTooLarge``, which the caller splits (``sinks.mysql.split``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from tributary.change import Ddl, RowChange, Txn
from tributary.sinks.compact import compact, late_tables
from tributary.sinks.mysql.conn import (
    DRIVER_ERRORS,
    IGNORABLE_DDL_CODES,
    LOCK_CODES,
    TOO_LARGE_CODES,
    Session,
    error_code,
    is_retriable,
    sink_error,
)
from tributary.sinks.mysql.ddlmark import (
    index_shapes_query,
    mark_from_rows,
    mark_load,
    mark_save,
    shapes_of,
    unnamed_indexes,
)
from tributary.sinks.mysql.statements import (
    MAX_BYTES,
    MAX_ROWS,
    compacted_statements,
    mysql_ddl,
    plain_statements,
)
from tributary.sinks.port import SinkError
from tributary.sql import Statement

log = logging.getLogger(__name__)

Group = tuple[int, list[Statement]]  # an upstream commit ts and its statements


class TxnTooLarge(SinkError):
    """The downstream refused a transaction for its size (TiDB's ``txn-total-size-limit``),
    nothing of it committed: smaller transactions may pass, the same one never does."""


def span(first: int, last: int) -> str:
    if first == last:
        return f"transaction at commit ts {first}"
    return f"transactions at commit ts {first} to {last}"


def groups_of(items: Sequence[tuple[int, RowChange]], *, safe: bool) -> list[Group]:
    """Plain statements per upstream transaction, for ``locate``."""
    out: list[Group] = []
    start = 0
    for i in range(1, len(items) + 1):
        if i == len(items) or items[i][0] != items[start][0]:
            changes = [c for _, c in items[start:i]]
            out.append((items[start][0], plain_statements(changes, safe=safe)))
            start = i
    return out


async def locate(conn: Session, groups: Sequence[Group]) -> int | None:
    """The commit ts of the first group failing with a non-retriable error, all rolled back."""
    try:
        await conn.begin(checked=True)  # a duplicate key fails its statement, even on TiDB
        for ts, stmts in groups:
            try:
                await conn.run(stmts)
            except DRIVER_ERRORS as e:
                if is_retriable(e):
                    raise
                return ts
        return None
    except DRIVER_ERRORS as e:
        raise sink_error("while looking for the failing transaction", e) from e
    finally:
        await conn.rollback_quietly()


async def run_transaction(
    conn: Session,
    stmts: Sequence[Statement],
    groups: Callable[[], Sequence[Group]],
    ts: tuple[int, int],
) -> None:
    """``stmts`` in one downstream transaction, for the upstream transactions with commit ts in
    the range ``ts``; on a non-retriable error, blame one of ``groups()``."""
    try:
        await conn.transaction(stmts)
    except DRIVER_ERRORS as e:
        if error_code(e) in LOCK_CODES:
            await conn.rollback_quietly()  # after 1205 the transaction is still open
        if is_retriable(e):
            raise sink_error(f"{span(*ts)} interrupted", e) from e
        await conn.rollback_quietly()
        if error_code(e) in TOO_LARGE_CODES:
            raise TxnTooLarge(f"mysql sink: {span(*ts)} too large for one transaction: {e}") from e
        culprit = await locate(conn, groups())
        where = span(culprit, culprit) if culprit is not None else span(*ts)
        raise SinkError(f"mysql sink: {where} failed: {e}") from e


def stretch_statements(
    changes: Sequence[RowChange],
    *,
    safe: bool,
    late: Collection[tuple[str, str]],
    ts: tuple[int, int],
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
) -> list[Statement]:
    """The compacted statements of ``changes`` (``late`` tables in upstream order), multi-row
    ones cut at ``max_rows`` rows or about ``max_bytes``, or a SinkError naming the transactions
    (commit ts range ``ts``) whose rows cannot be written."""
    try:
        compacted = compact(changes, safe=safe, in_order=late)
        return compacted_statements(compacted, safe=safe, max_rows=max_rows, max_bytes=max_bytes)
    except ValueError as e:
        raise SinkError(f"mysql sink: {span(*ts)}: cannot build the statements: {e}") from e


async def apply_stretch(
    conn: Session, txns: Sequence[Txn], save: Statement, safe: bool, *, seen: int = 0
) -> None:
    """Row transactions compacted, then the checkpoint row, in one downstream transaction;
    ``seen`` is the newest schema version before them (``compact.late_tables``)."""
    changes = [c for t in txns for c in t.rows]
    ts = (txns[0].commit_ts, txns[-1].commit_ts)
    stmts = stretch_statements(changes, safe=safe, late=late_tables(txns, seen), ts=ts)

    def groups() -> list[Group]:
        return [(t.commit_ts, plain_statements(t.rows, safe=safe)) for t in txns if t.rows]

    await run_transaction(conn, [*stmts, save], groups, ts)


@dataclass(frozen=True, slots=True)
class DdlBook:
    """Where the DDL record of ``ddlmark`` lives and under which key."""

    key: int
    schema: str
    table: str


async def apply_ddl(conn: Session, txn: Txn, book: DdlBook, save: Statement, *, safe: bool) -> None:
    """A DDL once (``ddlmark``): skipped when its record says it ran; else recorded as started,
    run (an unnamed index addition of a replay or in safe mode skipped when an identical index
    exists), then recorded as finished in one transaction with the checkpoint row ``save``."""
    assert txn.ddl is not None
    ts, ddl = txn.commit_ts, txn.ddl
    try:
        load = mark_load(book.key, book.schema, book.table)
        mark = mark_from_rows(await conn.query(load.sql, load.args))
    except DRIVER_ERRORS as e:
        raise sink_error("cannot read the DDL record", e) from e
    if mark is not None and mark.finished and ts <= mark.commit_ts:
        log.info("DDL at commit ts %s skipped, recorded as run: %s", ts, ddl.query)
        await save_alone(conn, save)  # the record stays where it is, never lower
        return
    replay = safe or (mark is not None and mark.commit_ts == ts)
    if replay and await has_indexes(conn, ddl):
        log.warning("DDL at commit ts %s skipped, its indexes are there: %s", ts, ddl.query)
    else:
        start = mark_save(book.key, ts, ddl, finished=False, schema=book.schema, table=book.table)
        await save_alone(conn, start)
        await run_ddl(conn, txn)
    done = mark_save(book.key, ts, ddl, finished=True, schema=book.schema, table=book.table)
    await run_transaction(conn, [done, save], lambda: [], (ts, ts))


async def has_indexes(conn: Session, ddl: Ddl) -> bool:
    """Whether ``ddl`` adds only unnamed indexes, each of which the table has already."""
    adds = unnamed_indexes(ddl)
    if adds is None:
        return False
    try:
        found = index_shapes_query(adds.schema, adds.table)
        shapes = shapes_of(await conn.query(found.sql, found.args))
    except DRIVER_ERRORS as e:
        raise sink_error("cannot read the indexes of the DDL's table", e) from e
    return all(s in shapes for s in adds.shapes)


async def run_ddl(conn: Session, txn: Txn) -> None:
    """``USE db`` and the DDL, in autocommit; a DDL already applied (a replay) is skipped when
    its error code says so."""
    assert txn.ddl is not None
    conn.allow_write()  # a DDL cannot be rolled back: it never starts past the gate
    try:
        for sql in mysql_ddl(txn.ddl):
            await conn.execute(sql)  # no parameters: the text is sent as it is
    except DRIVER_ERRORS as e:
        code = error_code(e)
        if code in IGNORABLE_DDL_CODES:
            log.warning("DDL at commit ts %s skipped (%s): %s", txn.commit_ts, e, txn.ddl.query)
            return
        raise sink_error(f"DDL at commit ts {txn.commit_ts} ({txn.ddl.query!r}) failed", e) from e


async def save_alone(conn: Session, save: Statement) -> None:
    """The checkpoint row in a transaction of its own."""
    conn.allow_write()
    try:
        await conn.run([save])
    except DRIVER_ERRORS as e:
        raise sink_error("saving the checkpoint failed", e) from e
