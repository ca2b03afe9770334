"""TiCDC's event filters (``[[filter.event-filters]]``) applied to the binlog's transactions.

Each rule names its tables with ``matcher`` (the table-filter syntax of ``rules``) and drops,
for those tables: the event types of ``ignore-event``, the DDL whose query matches a regex of
``ignore-sql`` (case-insensitive, searched anywhere), and the rows for which an expression is
true (``ignore-insert-value-expr`` on inserted rows, ``ignore-update-new-value-expr`` /
``ignore-update-old-value-expr`` on the new / old image of updates,
``ignore-delete-value-expr`` on deleted rows; ``sqlexpr``).

A dropped row leaves its transaction (the others are applied); a dropped DDL, or a transaction
left with nothing, becomes a checkpoint-only marker, so checkpoint and position still move.

Event types: ``all dml``, ``insert``, ``update``, ``delete``, ``all ddl`` and the DDL types
``DDL_TYPES`` names, read from the query (an ``ALTER TABLE`` is ``alter table`` and each of
its clauses' types, e.g. ``add column``; with several clauses also ``multi schema change``).
TiDB-only types (``rebase auto id``, ``set tiflash replica``, ...) are refused: a MySQL or
MariaDB binlog never carries them.

Example: matcher ``['shop.orders']``, ignore-event ``['delete']``, ignore-insert-value-expr
``"price > 1000"``: a transaction inserting orders priced 10 and 5000 and deleting one order
reaches the sink with the insert of the order priced 10 only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from services.capture.errors import BadRequest
from services.capture.rules import table_filter
from services.capture.sqlexpr import ColumnMissing, Expr, compile_expr
from tributary.cdc.errors import CaptureError
from tributary.cdc.replica import EventFilterRule
from tributary.change import Ddl, RowChange, RowKind, TableFilter, Txn

DML_TYPES = {"insert": RowKind.INSERT, "update": RowKind.UPDATE, "delete": RowKind.DELETE}

# (event type, pattern on the upper-cased, space-collapsed query), first match wins for the
# statement; ALTER TABLE clauses are matched one by one (_ALTER_CLAUSES).
_STATEMENTS: tuple[tuple[str, str], ...] = (
    ("create database", r"^CREATE (DATABASE|SCHEMA)\b"),
    ("drop database", r"^DROP (DATABASE|SCHEMA)\b"),
    ("modify schema charset and collate", r"^ALTER (DATABASE|SCHEMA)\b"),
    ("create table", r"^CREATE (OR REPLACE )?(TEMPORARY )?TABLE\b"),
    ("drop table", r"^DROP (TEMPORARY )?TABLE\b"),
    ("rename table", r"^RENAME TABLES?\b"),
    ("truncate table", r"^TRUNCATE\b"),
    (
        "create view",
        r"^CREATE (OR REPLACE )?(ALGORITHM *= *\w+ )?(DEFINER *= *\S+ )?"
        r"(SQL SECURITY \w+ )?VIEW\b",
    ),
    ("drop view", r"^DROP VIEW\b"),
    ("create index", r"^CREATE (UNIQUE |FULLTEXT |SPATIAL )?INDEX\b"),
    ("drop index", r"^DROP INDEX\b"),
    ("alter table", r"^ALTER (ONLINE |IGNORE )?TABLE\b"),
)
_ALTER_CLAUSES: tuple[tuple[str, str], ...] = (
    ("add primary key", r"^ADD (CONSTRAINT \S+ )?PRIMARY KEY\b"),
    ("add index", r"^ADD (CONSTRAINT \S+ )?(UNIQUE |FULLTEXT |SPATIAL )?(INDEX|KEY)\b"),
    ("add index", r"^ADD (CONSTRAINT \S+ )?UNIQUE\b"),
    ("add table partition", r"^ADD PARTITION\b"),
    ("add column", r"^ADD\b"),
    ("drop primary key", r"^DROP PRIMARY KEY\b"),
    ("drop index", r"^DROP (INDEX|KEY)\b"),
    ("drop table partition", r"^DROP PARTITION\b"),
    ("drop column", r"^DROP\b"),
    ("truncate table partition", r"^TRUNCATE PARTITION\b"),
    ("rename index", r"^RENAME (INDEX|KEY)\b"),
    ("rename table", r"^RENAME\b"),
    ("modify column", r"^(MODIFY|CHANGE)\b"),
    ("set default value", r"^ALTER (COLUMN )?\S+ (SET|DROP) DEFAULT\b"),
    (
        "modify table charset and collate",
        r"^(CONVERT TO |(DEFAULT )?(CHARACTER SET|CHARSET|COLLATE))",
    ),
    ("modify table comment", r"^COMMENT\b"),
    ("exchange table partition", r"^EXCHANGE PARTITION\b"),
    ("reorganize table partition", r"^REORGANIZE PARTITION\b"),
    ("remove table partitioning", r"^REMOVE PARTITIONING\b"),
    ("alter table partitioning", r"^PARTITION BY\b"),
)
DDL_TYPES = frozenset(
    {t for t, _ in _STATEMENTS} | {t for t, _ in _ALTER_CLAUSES} | {"multi schema change"}
)
_ALIASES = {"create schema": "create database", "drop schema": "drop database"}
TIDB_ONLY = frozenset(
    {
        "rebase auto id",
        "set tiflash replica",
        "alter ttl info",
        "alter ttl remove",
        "recover table",
        "alter index visibility",
        "add table partition placement",
        "create placement policy",
    }
)
KNOWN = frozenset({"all dml", "all ddl"} | set(DML_TYPES) | DDL_TYPES | set(_ALIASES))


def ddl_types(query: str) -> frozenset[str]:
    """The event types of a DDL statement (empty when it is none this module knows)."""
    q = " ".join(re.sub(r"/\*.*?\*/", " ", query, flags=re.S).split()).upper()
    name = next((n for n, pattern in _STATEMENTS if re.search(pattern, q)), None)
    if name is None:
        return frozenset()
    if name != "alter table":
        return frozenset({name})
    body = re.sub(r"^ALTER (ONLINE |IGNORE )?TABLE (`[^`]+`|\S+)( *\. *(`[^`]+`|\S+))? ?", "", q)
    clauses = [c.strip() for c in _split_clauses(body) if c.strip()]
    types = {"alter table"}
    for clause in clauses:
        for clause_type, pattern in _ALTER_CLAUSES:
            if re.search(pattern, clause):
                types.add(clause_type)
                break
    if len(clauses) > 1:
        types.add("multi schema change")
    return frozenset(types)


def _split_clauses(body: str) -> list[str]:
    """ALTER TABLE clauses: commas outside parentheses and quotes."""
    out, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(body):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(body[start:i])
            start = i + 1
    out.append(body[start:])
    return out


@dataclass(frozen=True)
class _Rule:
    tables: TableFilter
    events: frozenset[str]
    sql: tuple[re.Pattern[str], ...]
    insert: Expr | None
    update_new: Expr | None
    update_old: Expr | None
    delete: Expr | None
    text: EventFilterRule


def _compile(rule: EventFilterRule, where: str) -> _Rule:
    unknown = [e for e in rule.ignore_event if e.lower() not in KNOWN]
    tidb = [e for e in unknown if e.lower() in TIDB_ONLY]
    if tidb:
        raise BadRequest(
            f"{where}.ignore-event {tidb}: TiDB-only events, never in a MySQL/MariaDB binlog"
        )
    if unknown:
        raise BadRequest(
            f"{where}.ignore-event: unknown event types {unknown} (known: "
            f"{', '.join(sorted(KNOWN))})"
        )
    try:
        sql = tuple(re.compile(p, re.IGNORECASE) for p in rule.ignore_sql)
    except re.error as e:
        raise BadRequest(f"{where}.ignore-sql: bad regular expression: {e}") from e

    def expr(text: str, key: str) -> Expr | None:
        if not text.strip():
            return None
        try:
            return compile_expr(text)
        except BadRequest as e:
            raise BadRequest(f"{where}.{key}: {e}") from e

    return _Rule(
        tables=table_filter(rule.matcher),
        events=frozenset(_ALIASES.get(e.lower(), e.lower()) for e in rule.ignore_event),
        sql=sql,
        insert=expr(rule.ignore_insert_value_expr, "ignore-insert-value-expr"),
        update_new=expr(rule.ignore_update_new_value_expr, "ignore-update-new-value-expr"),
        update_old=expr(rule.ignore_update_old_value_expr, "ignore-update-old-value-expr"),
        delete=expr(rule.ignore_delete_value_expr, "ignore-delete-value-expr"),
        text=rule,
    )


class EventFilter:
    """The compiled rules of one changefeed; BadRequest at construction names a bad rule."""

    def __init__(self, rules: Sequence[EventFilterRule]) -> None:
        self._rules = [
            _compile(r, f"config.filter.event-filters[{i}]") for i, r in enumerate(rules)
        ]

    def __bool__(self) -> bool:
        return bool(self._rules)

    def apply(self, txn: Txn) -> Txn:
        """``txn`` without what the rules drop (a checkpoint-only marker if nothing is left)."""
        if not self._rules:
            return txn
        if txn.ddl is not None:
            return Txn(txn.commit_ts, txn.start_ts) if self._drops_ddl(txn.ddl) else txn
        if not txn.rows:
            return txn
        kept = tuple(r for r in txn.rows if not self._drops_row(r))
        return txn if len(kept) == len(txn.rows) else replace(txn, rows=kept)

    def _drops_ddl(self, ddl: Ddl) -> bool:
        types = ddl_types(ddl.query)
        for rule in self._rules:
            if not rule.tables.allows(ddl.schema, ddl.table):
                continue
            if "all ddl" in rule.events or types & rule.events:
                return True
            if any(p.search(ddl.query) for p in rule.sql):
                return True
        return False

    def _drops_row(self, row: RowChange) -> bool:
        kind = row.kind.name.lower()
        for rule in self._rules:
            if not rule.tables.allows(row.table.schema, row.table.table):
                continue
            if "all dml" in rule.events or kind in rule.events:
                return True
            try:
                if _true(rule, row):
                    return True
            except ColumnMissing as e:
                raise CaptureError(
                    f"event filter {rule.text.matcher}: {row.table.schema}.{row.table.table} "
                    f"has no column {e.args[0]!r}",
                    retriable=False,
                ) from e
        return False


def _true(rule: _Rule, row: RowChange) -> bool:
    if row.kind is RowKind.INSERT:
        return rule.insert is not None and rule.insert(row.values) is True
    if row.kind is RowKind.DELETE:
        return rule.delete is not None and rule.delete(row.values) is True
    if rule.update_new is not None and rule.update_new(row.values) is True:
        return True
    old = row.old_values
    return rule.update_old is not None and old is not None and rule.update_old(old) is True
