"""The storage sink's store errors (``store.Store``): ``OSError``s, as a disk's are."""

from __future__ import annotations


class StoreError(OSError):
    """The store could not be reached or refused a call (retriable, as a disk's I/O error)."""


class UnsafeStore(StoreError):
    """The store cannot keep ``create``'s promise (an S3 service that ignores conditional
    writes): the sink does not open on it (not retriable)."""
