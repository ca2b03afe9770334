"""The one error root of Tributary: every error raised on purpose is a ``TributaryError``.

``retriable`` answers one question for whoever catches the error: may doing the same thing
again (now, later, on another node) succeed? Each class sets its default (``retriable = True``
for a lost connection, False for malformed input) and a raise site may override it per
instance (``SinkError("...", retriable=code in RETRIABLE)``).

Invariant: errors are classified by type, error code or status, never by message text; a
library's error is mapped where it is caught (``raise SinkError(...) from e``) so the cause
stays attached. This module imports nothing, so every package (the TiDB codec included) can
derive from it.
"""

from __future__ import annotations


class TributaryError(Exception):
    """Root of every error Tributary raises on purpose; ``retriable`` says if a retry may help."""

    retriable: bool = False

    def __init__(self, *args: object, retriable: bool | None = None) -> None:
        super().__init__(*args)
        if retriable is not None:
            self.retriable = retriable
