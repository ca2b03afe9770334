"""The capture service's errors, beneath the capture cluster's root (``tributary.cdc.errors``).

Every error this package raises on purpose is a ``CaptureError`` with ``retriable`` saying
whether trying again may help; errors from etcd, sinks and the source are mapped at the
boundary (``raise ... from e``), never classified by their message text.
"""

from __future__ import annotations

from tributary.cdc.errors import CaptureError


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
