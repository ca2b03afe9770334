"""Which QUERY events are DDL to replicate, and which table or database they touch.

Outside a transaction, the row binlog holds statements as QUERY events: schema DDL (CREATE,
ALTER, DROP, RENAME, TRUNCATE of tables, databases, indexes and views), which replicates, and
account, routine and maintenance statements (GRANT, CREATE USER, CREATE TRIGGER, FLUSH,
ANALYZE, ...), which do not: those become checkpoint-only transactions.

The touched name decides filtering: ``classify("shop", "ALTER TABLE `db2`.t ADD c int")`` is
``DdlTarget("db2", "t")`` (a qualified name wins over the session database, so a filter on
``db2`` sees it); ``CREATE DATABASE x`` is ``DdlTarget("x", "")``; ``GRANT ...`` is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMMENTS = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|#[^\n]*\n?|--\s[^\n]*\n?)*", re.S)
_NAME = r"(?:`((?:[^`]|``)+)`|([\w$]+))"
_QUALIFIED = rf"{_NAME}(?:\s*\.\s*{_NAME})?"
_IF = r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
_TABLE = re.compile(
    r"^(?:CREATE\s+(?:OR\s+REPLACE\s+)?|ALTER\s+(?:ONLINE\s+|IGNORE\s+)*|DROP\s+|RENAME\s+"
    rf"|TRUNCATE\s+)(?:TABLE\s+|TABLES\s+){_IF}{_QUALIFIED}",
    re.I,
)
_TRUNCATE = re.compile(rf"^TRUNCATE\s+{_QUALIFIED}", re.I)
_DATABASE = re.compile(
    rf"^(?:CREATE\s+(?:OR\s+REPLACE\s+)?|ALTER\s+|DROP\s+)(?:DATABASE|SCHEMA)\s+{_IF}{_NAME}",
    re.I,
)
_INDEX = re.compile(
    r"^(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:ONLINE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?|DROP\s+)"
    rf"INDEX\s+{_IF}{_NAME}\s+ON\s+{_QUALIFIED}",
    re.I,
)
_VIEW = re.compile(
    r"^(?:CREATE\s+(?:OR\s+REPLACE\s+)?|ALTER\s+|DROP\s+)(?:ALGORITHM\s*=\s*\w+\s+)?"
    rf"(?:DEFINER\s*=\s*\S+\s+)?(?:SQL\s+SECURITY\s+\w+\s+)?VIEW\s+{_IF}{_QUALIFIED}",
    re.I,
)
_TEMPORARY = re.compile(r"^(?:CREATE|DROP)\s+(?:OR\s+REPLACE\s+)?TEMPORARY\s", re.I)


@dataclass(frozen=True, slots=True)
class DdlTarget:
    schema: str
    table: str


def strip_comments(query: str) -> str:
    """The statement without leading whitespace and comments (``/*! ... */`` kept: it runs)."""
    return query[_COMMENTS.match(query).end() :]  # type: ignore[union-attr]


def _name(quoted: str | None, bare: str | None) -> str:
    return quoted.replace("``", "`") if quoted is not None else bare or ""


def _split(groups: tuple[str | None, ...], session: str) -> DdlTarget:
    first = _name(groups[0], groups[1])
    if groups[2] is not None or groups[3] is not None:
        return DdlTarget(first, _name(groups[2], groups[3]))
    return DdlTarget(session, first)


def classify(session_db: str, query: str) -> DdlTarget | None:
    """The schema object ``query`` changes, or None when it is not DDL to replicate."""
    q = strip_comments(query)
    if _TEMPORARY.match(q):
        return None
    if m := _TABLE.match(q) or _TRUNCATE.match(q):
        return _split(m.groups(), session_db)
    if m := _DATABASE.match(q):
        return DdlTarget(_name(m.group(1), m.group(2)), "")
    if m := _INDEX.match(q):
        return _split(m.groups()[2:], session_db)
    if m := _VIEW.match(q):
        return _split(m.groups(), session_db)
    return None
