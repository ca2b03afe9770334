"""The consistency checker: compares tables between an upstream and a downstream database.

``compare(upstream_url, downstream_url, tables=..., chunk_size=...)`` returns a ``Report``
listing, per table, the chunks checked and the rows missing, extra or different downstream.
``python -m tributary.checker`` (``checker.cli``) is the command line. Modules: ``source``
(the port and the URL opener), ``mysql_source``/``sqlite_source``, ``coltypes``/``canon``
(the canonical value form), ``pairing`` (the per-table plan), ``chunks``, ``diff``, ``table``,
``compare``, ``report``, ``filter``.
"""

from tributary.checker.compare import compare
from tributary.checker.errors import CheckerError, SourceError, UsageError
from tributary.checker.report import DiffKind, Presence, Report, RowDiff, TableReport

__all__ = [
    "CheckerError",
    "DiffKind",
    "Presence",
    "Report",
    "RowDiff",
    "SourceError",
    "TableReport",
    "UsageError",
    "compare",
]
