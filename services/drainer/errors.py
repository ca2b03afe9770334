"""The drainer's error root.

Every failure the drainer raises on purpose is a ``DrainerError``; ``retriable``
says whether trying again (a reconnect, a restart) may help. Errors from
libraries are mapped at the module that calls them (``raise ... from e``).
"""

from __future__ import annotations

from tributary.errors import TributaryError


class DrainerError(TributaryError):
    """A drainer failure; ``retriable`` says whether a retry may help."""


class MalformedPayload(DrainerError):
    """A pump served a payload that is not a binlog: the drainer must stop."""


class CheckpointError(DrainerError):
    """The checkpoint could not be read or written."""


class SinkError(DrainerError):
    """The sink cannot be built or refused a binlog."""


class CollectorStopped(DrainerError):
    """The collector is not running (starting up or shutting down)."""

    retriable = True
