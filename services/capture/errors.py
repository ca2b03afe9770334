"""The capture cluster's error root.

Every error this package raises on purpose is a ``CaptureError`` with ``retriable`` saying
whether trying again may help; errors from etcd, sinks and the source are mapped at the
boundary (``raise ... from e``), never classified by their message text.
"""

from __future__ import annotations

from tributary.errors import TributaryError


class CaptureError(TributaryError):
    """Something in the capture cluster failed."""


class BadRecord(CaptureError):
    """A JSON record in etcd (or a request) that cannot be read."""


class FeedNotFound(CaptureError):
    """No changefeed with that namespace and id."""


class FeedExists(CaptureError):
    """A changefeed with that namespace and id already exists."""


class BadRequest(CaptureError):
    """A changefeed operation that is not allowed as asked (bad field, wrong state)."""


class Conflict(CaptureError):
    """A guarded etcd transaction kept losing to concurrent writers."""

    retriable = True


class NotOwner(CaptureError):
    """This capture lost (or never had) ownership; its owner work stops."""

    retriable = True
