"""The source's one error root: ``SourceError`` with ``retriable``.

Retriable: the connection to the server was lost or timed out, or the server stopped the dump
for a transient reason (shutdown, killed thread): reopening from the last position resumes.
Not retriable: a server configured so rows cannot be decoded (no ROW binlog, no FULL row
metadata), a position the server no longer has, bad credentials, a corrupt event.
Errors are classified by type and MySQL error code, never by message text.
"""

from __future__ import annotations

from tributary.errors import TributaryError

# Server error codes after which reopening the dump may work.
RETRIABLE_CODES = frozenset(
    {
        1040,  # ER_CON_COUNT_ERROR: too many connections
        1053,  # ER_SERVER_SHUTDOWN
        1159,  # ER_NET_READ_INTERRUPTED
        1161,  # ER_NET_WRITE_INTERRUPTED
        1205,  # ER_LOCK_WAIT_TIMEOUT
        1927,  # ER_CONNECTION_KILLED (MariaDB)
        2006,  # CR_SERVER_GONE_ERROR
        2013,  # CR_SERVER_LOST
    }
)


class SourceError(TributaryError):
    """Reading the upstream binlog failed; ``retriable`` says whether reopening may help."""


class ConnectionLost(SourceError):
    """The server closed the connection or stopped answering."""

    retriable = True


class ServerError(SourceError):
    """The server answered with an error packet; ``code`` is its MySQL error number."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"server error {code}: {message}", retriable=code in RETRIABLE_CODES)
        self.code = code


class ConfigurationError(SourceError):
    """The upstream is not configured so that rows can be decoded from its binlog."""


class MalformedEvent(SourceError):
    """An event that does not parse, fails its checksum, or uses a format we do not read."""
