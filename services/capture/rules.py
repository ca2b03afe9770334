"""TiCDC filter rules (``db.table`` globs, ``!`` to exclude) as a ``change.TableFilter``.

TiCDC's table filter lets the last matching rule win; this translation is the common subset:
positive rules form the allow-list, ``!`` rules the block-list, and a table replicates when it
matches some positive rule and no negative one. A ``*`` table part makes a rule database-wide.
System schemas (``SYSTEM_SCHEMAS``) never replicate, whatever the rules say, as in TiCDC, whose
filter ignores every schema TiDB's ``IsSystemSchema`` names (``mysql``, ``sys``,
``information_schema``, ``performance_schema``, ``metrics_schema``, ``inspection_schema``,
``dm_heartbeat``), plus the schemas its filter package names as its own or its tools'
(``tidb_cdc``, ``lightning_task_info``, ``workload_schema``); names compare
case-insensitively. A MariaDB upstream has ``sys`` (``sys.sys_config``) besides ``mysql``.

Example: ``['*.*', '!test.*', '!shop.tmp_*']`` -> everything but the schema ``test`` and the
tables of ``shop`` whose names start with ``tmp_``; ``['shop.*', 'crm.users']`` -> only the schema
``shop`` and the table ``crm.users``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from services.capture.errors import BadRequest
from tributary.change import FilterError, TableFilter

_GLOB = frozenset("*?[")
SYSTEM_SCHEMAS = (
    "mysql",
    "sys",
    "information_schema",
    "performance_schema",
    "metrics_schema",
    "inspection_schema",
    "dm_heartbeat",
    "tidb_cdc",
    "lightning_task_info",
    "workload_schema",
)


def _pattern(glob: str) -> str:
    """A TableFilter pattern for one glob: the plain name, or ``~`` and an anchored regex."""
    if not _GLOB.intersection(glob):
        return glob
    return "~^" + fnmatch.translate(glob)


def _split(rule: str) -> tuple[str, str]:
    db, dot, table = rule.partition(".")
    if not dot or not db or not table:
        raise BadRequest(f"filter rule {rule!r} is not of the form db.table (globs allowed)")
    return db, table


def table_filter(rules: Sequence[str]) -> TableFilter:
    """The filter the rules describe; BadRequest for a malformed rule or no positive rule."""
    do_dbs: list[str] = []
    do_tables: list[tuple[str, str]] = []
    ignore_dbs: list[str] = list(SYSTEM_SCHEMAS)
    ignore_tables: list[tuple[str, str]] = []
    everything = False
    positives = 0
    for raw in rules:
        rule = raw.strip()
        negative = rule.startswith("!")
        db, table = _split(rule[1:] if negative else rule)
        if negative:
            if table == "*":
                ignore_dbs.append(_pattern(db))
            else:
                ignore_tables.append((_pattern(db), _pattern(table)))
            continue
        positives += 1
        if db == "*" and table == "*":
            everything = True
        elif table == "*":
            do_dbs.append(_pattern(db))
        else:
            do_tables.append((_pattern(db), _pattern(table)))
    if not positives:
        raise BadRequest("filter rules need at least one positive rule, such as '*.*'")
    if everything:
        do_dbs, do_tables = [], []
    try:
        return TableFilter(
            do_dbs=do_dbs, do_tables=do_tables, ignore_dbs=ignore_dbs, ignore_tables=ignore_tables
        )
    except FilterError as e:
        raise BadRequest(f"bad filter rule: {e}") from e
