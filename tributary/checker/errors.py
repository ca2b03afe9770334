"""The checker's error root: every failure the checker reports is a ``CheckerError``.

``UsageError``: a bad URL, pattern or option (exit code 2, nothing was compared).
``SourceError``: a database could not be reached or a query failed; driver errors are mapped
to it at the source's edge (``raise SourceError(...) from e``), with ``retriable`` set when the
failure is a lost connection or a lock timeout rather than a bad query.
"""

from __future__ import annotations

from tributary.errors import TributaryError


class CheckerError(TributaryError):
    """A comparison could not be done; ``retriable`` says whether trying again may help."""


class UsageError(CheckerError):
    """Bad input from the caller: URL, table pattern, option value."""


class SourceError(CheckerError):
    """A database failed: cannot connect, cannot read its catalog, a query failed."""
