"""The DDL history's error root.

Every failure of a history source is a ``DdlHistoryError``; ``retriable`` says
whether asking again may help (the store or the TiDB server was unreachable)
or not (a job document is malformed, a job id was reused with other content).
Errors of the libraries underneath are mapped where they are called
(``raise ... from e``).
"""

from __future__ import annotations

from tributary.errors import TributaryError


class DdlHistoryError(TributaryError):
    """A DDL history source failed; ``retriable`` says whether a retry may help."""


class MalformedJob(DdlHistoryError):
    """A stored or served job is not a DDL job in TiDB's JSON shape."""


class JobConflict(DdlHistoryError):
    """A job id (or schema version) is already taken by a different job."""


class ReadOnlyHistory(DdlHistoryError):
    """The source cannot store jobs (TiDB keeps its own history)."""
