"""The capture cluster's error root, and the error for a record that cannot be read.

Every error the capture cluster raises on purpose is a ``CaptureError`` with ``retriable`` saying
whether trying again may help (the capture service defines the rest in
``services.capture.errors``); errors from etcd, sinks and the source are mapped at the boundary
(``raise ... from e``), never classified by their message text.
"""

from __future__ import annotations

from tributary.errors import TributaryError


class CaptureError(TributaryError):
    """Something in the capture cluster failed."""


class BadRecord(CaptureError):
    """A JSON record in etcd (or a request) that cannot be read."""
