"""Errors raised by the pump storage; one root with a ``retriable`` flag.

``retriable`` answers: may the same write succeed if the caller tries this
storage again later? A full disk or a broken file is not retriable (the caller
should go to another pump); a closed storage or a transient I/O error is.
"""

from __future__ import annotations

import errno

from tributary.errors import TributaryError

# OS errors that will not go away by themselves: the disk is full, over quota,
# read-only, the file is too big, or the device failed.
_PERMANENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.EBADF}
)


class StorageError(TributaryError):
    """The storage could not complete an operation."""

    retriable = True


class StorageFull(StorageError):
    """Available disk space is below ``stop_write_at_available_space``."""

    retriable = False


class StorageClosed(StorageError):
    """The storage is closing or closed; nothing more is accepted."""

    retriable = True


def from_os_error(what: str, exc: OSError) -> StorageError:
    """Map an ``OSError`` to a :class:`StorageError` by its errno (never its text)."""
    return StorageError(f"{what}: {exc}", retriable=exc.errno not in _PERMANENT_ERRNOS)
