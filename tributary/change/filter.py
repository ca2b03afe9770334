"""Which upstream tables replicate: tidb-binlog's allow-list then block-list, on ``Txn``s.

Rules (as the drainer's and reparo's ``replicate-do-db`` / ``replicate-do-table`` /
``ignore-schemas`` / ``ignore-table``):

1. Allow-list: with no ``do_dbs`` and no ``do_tables`` every table passes; otherwise a table
   passes when its schema matches a ``do_dbs`` pattern or ``(schema, table)`` matches a
   ``do_tables`` pair.
2. Block-list: a table that passed is dropped when its schema matches an ``ignore_dbs``
   pattern or ``(schema, table)`` matches an ``ignore_tables`` pair.

A pattern is a name compared case-insensitively, or ``~regex`` searched case-insensitively in
the name, unanchored unless the regex anchors itself (``~^log_``: names starting with ``log_``;
``~tmp``: any name containing ``tmp``). A database-level DDL (no table) passes the allow-list
when its schema is named by a ``do_dbs`` pattern or by the schema of a ``do_tables`` pair, so
``CREATE DATABASE shop`` still replicates with only ``do_tables = [("shop", "orders")]``.

Invariant: ``filter`` never reorders or alters what it keeps; a transaction left with nothing
becomes a checkpoint-only marker with the same timestamps, so filtered stretches still move
the checkpoint. Example with ``ignore_tables=[("shop", "~^tmp_")]``: a transaction writing
``shop.orders`` and ``shop.tmp_1`` keeps only its ``shop.orders`` rows; one writing only
``shop.tmp_2`` becomes ``Txn(commit_ts, start_ts)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tributary.change.model import Txn
from tributary.errors import TributaryError

DEFAULT_IGNORE_DBS = ("INFORMATION_SCHEMA", "PERFORMANCE_SCHEMA", "mysql")


class FilterError(TributaryError, ValueError):
    """A pattern that does not compile."""


@dataclass(frozen=True, slots=True)
class Pattern:
    text: str
    _regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> Pattern:
        if text.startswith("~"):
            try:
                return cls(text, re.compile(text[1:], re.IGNORECASE))
            except re.error as e:
                raise FilterError(f"bad pattern {text!r}: {e}") from e
        return cls(text.lower())

    def matches(self, name: str) -> bool:
        if self._regex is not None:
            return self._regex.search(name) is not None
        return self.text == name.lower()


def _patterns(texts: Iterable[str]) -> tuple[Pattern, ...]:
    return tuple(Pattern.parse(t) for t in texts if t)


def _pairs(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[Pattern, Pattern], ...]:
    return tuple((Pattern.parse(db), Pattern.parse(tbl)) for db, tbl in pairs)


def parse_table(text: str) -> tuple[str, str]:
    """``"db.table"`` -> ``("db", "table")``; the first dot splits (``~`` patterns of a table may
    hold dots, a schema pattern may not)."""
    db, dot, table = text.partition(".")
    if not dot or not db or not table:
        raise FilterError(f"expected db.table, got {text!r}")
    return db, table


class TableFilter:
    def __init__(
        self,
        *,
        do_dbs: Sequence[str] = (),
        do_tables: Sequence[tuple[str, str]] = (),
        ignore_dbs: Sequence[str] = (),
        ignore_tables: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._do_dbs = _patterns(do_dbs)
        self._do_tables = _pairs(do_tables)
        self._ignore_dbs = _patterns(ignore_dbs)
        self._ignore_tables = _pairs(ignore_tables)
        self._cache: dict[tuple[str, str], bool] = {}

    @property
    def passes_everything(self) -> bool:
        return not (self._do_dbs or self._do_tables or self._ignore_dbs or self._ignore_tables)

    def allows(self, schema: str, table: str = "") -> bool:
        """Whether ``schema.table`` (or, with no table, the database itself) replicates."""
        key = (schema, table)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._allowed(schema, table)
        return hit

    def _allowed(self, schema: str, table: str) -> bool:
        if self._do_dbs or self._do_tables:
            by_db = any(p.matches(schema) for p in self._do_dbs)
            if table:
                by_table = any(d.matches(schema) and t.matches(table) for d, t in self._do_tables)
            else:
                by_table = any(d.matches(schema) for d, _ in self._do_tables)
            if not (by_db or by_table):
                return False
        if any(p.matches(schema) for p in self._ignore_dbs):
            return False
        return not (
            table and any(d.matches(schema) and t.matches(table) for d, t in self._ignore_tables)
        )

    def filter(self, txn: Txn) -> Txn:
        """``txn`` with the rows and DDL of tables that do not replicate left out."""
        if self.passes_everything:
            return txn
        if txn.ddl is not None:
            if self.allows(txn.ddl.schema, txn.ddl.table):
                return txn
            return Txn(txn.commit_ts, txn.start_ts, schema_version=txn.schema_version)
        if not txn.rows:
            return txn
        kept = tuple(r for r in txn.rows if self.allows(r.table.schema, r.table.table))
        if len(kept) == len(txn.rows):
            return txn
        return Txn(txn.commit_ts, txn.start_ts, kept, schema_version=txn.schema_version)
