"""Errors raised by the pump storage; one root with a ``retriable`` flag.

``retriable`` answers: may the same write succeed if the caller tries this
storage again later? A full disk or a broken file is not retriable (the caller
should go to another pump); a closed storage or a transient I/O error is.
"""

from __future__ import annotations

import errno
import sqlite3

from tributary.errors import TributaryError

# OS errors that will not go away by themselves: the disk is full, over quota,
# read-only, the file is too big, or the device failed.
_PERMANENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.EBADF}
)
# Of those, the ones that say the filesystem has no room left (until space is freed).
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class StorageError(TributaryError):
    """The storage could not complete an operation."""

    retriable = True


class StorageFull(StorageError):
    """No room: free space is below ``stop_write_at_available_space``, or the filesystem
    itself is full (ENOSPC, EDQUOT, SQLite's SQLITE_FULL). Nothing was stored."""

    retriable = False


class StorageClosed(StorageError):
    """The storage is closing or closed; nothing more is accepted."""

    retriable = True


def from_os_error(what: str, exc: OSError) -> StorageError:
    """Map an ``OSError`` to a :class:`StorageError` by its errno (never its text); a full
    disk is a :class:`StorageFull`."""
    if exc.errno in _FULL_ERRNOS:
        return StorageFull(f"{what}: {exc}")
    return StorageError(f"{what}: {exc}", retriable=exc.errno not in _PERMANENT_ERRNOS)


def from_sqlite_error(what: str, exc: sqlite3.Error | OSError) -> StorageError:
    """Map an index error by its code (never its text); SQLITE_FULL is a :class:`StorageFull`."""
    if isinstance(exc, OSError):
        return from_os_error(what, exc)
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return StorageFull(f"{what}: {exc}")
    return StorageError(f"{what}: {exc}", retriable=True)
