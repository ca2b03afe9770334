"""Errors raised by the TiDB codec: one root, never retriable.

Every failure here is a property of the bytes or values handed in (malformed
input, a value that does not fit its column type), so retrying cannot help:
``retriable`` is always False. Callers at a boundary map these to their own
area's errors with ``raise ... from e``.
"""

from __future__ import annotations

from tributary.errors import TributaryError


class CodecError(TributaryError, ValueError):
    """Root of every tidbcodec error (a ``ValueError`` too)."""


class DecodeError(CodecError):
    """The bytes are not a valid encoding (truncated, bad flag, corrupt value)."""


class EncodeError(CodecError):
    """The value cannot be encoded (out of range, does not fit precision, wrong type)."""
