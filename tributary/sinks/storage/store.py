"""Where the storage sink's files live: the ``Store`` port, and what is built on it.

Two stores implement it: a directory (``files.Files``, ``file://``) and a bucket prefix of an
S3-compatible service (``s3.S3Store``, ``s3://``). Each keeps the two promises the sink's
guarantees rest on:

* ``create`` makes a file appear whole or not at all, and never over an existing one: it answers
  False, having written nothing, when the name is taken (so a file a consumer may have read is
  never replaced, even by a second writer); it returns once the file is durable;
* ``replace`` makes a file's new content appear whole (``metadata``, ``meta/CDC.index``).

Everything else reads: ``read`` and ``size`` (None for a missing file), ``list_names`` (the files
directly in a directory), ``walk`` (every file under the root, as relative paths, none of the
store's own temporary files). Calls block: the sink runs them in its worker threads, readers
in a thread or a Spark task. A failure of the medium is an ``OSError`` (``StoreError`` for the
S3 store), which the sink maps to a retriable ``SinkError``.

``next_index`` is the one way to pick a data file's number, the same for both stores.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Protocol

from tributary.sinks.storage.errors import StoreError, UnsafeStore
from tributary.sinks.storage.layout import INDEX_FILE, parse_data_file_name
from tributary.sinks.storage.settings import StorageSettings

__all__ = ["Store", "StoreError", "UnsafeStore", "next_index", "open_store"]


class Store(Protocol):
    @property
    def location(self) -> str:
        """Where the files are, for messages: a directory or ``s3://bucket/prefix``."""
        ...

    def open(self) -> None:
        """Make the root usable (create it, clear a dead writer's temporary files, check that
        the service keeps ``create``'s promise); the sink calls it once, readers never."""
        ...

    def create(self, relative: PurePosixPath, data: bytes) -> bool: ...

    def replace(self, relative: PurePosixPath, data: bytes) -> None: ...

    def read(self, relative: PurePosixPath) -> bytes | None: ...

    def size(self, relative: PurePosixPath) -> int | None: ...

    def list_names(self, relative: PurePosixPath) -> list[str]: ...

    def walk(self) -> list[str]: ...


def open_store(settings: StorageSettings) -> Store:
    """The store the settings name (not yet ``open``ed): S3 when they have S3 settings."""
    if settings.s3 is not None:
        from tributary.sinks.storage.s3 import S3Store  # brings botocore: only when used

        return S3Store(settings.s3, max_connections=settings.worker_count)
    from tributary.sinks.storage.files import Files

    return Files(Path(settings.directory))


def next_index(store: Store, directory: PurePosixPath, extension: str) -> int:
    """The first file number to use in a data directory, as TiCDC's
    ``getNextFileIdxFromIndexFile`` finds it: after the one ``meta/CDC.index`` names if that file
    exists and is not empty (else that number again: it was never written), and after every
    data file the directory holds. (``create`` still refuses a taken name: this only saves the
    tries.)"""
    last = 0
    named = store.read(directory / INDEX_FILE)
    if named is not None:
        name = named.decode(errors="replace").strip()
        n = parse_data_file_name(name, extension)
        if n is not None:
            written = (store.size(directory / name) or 0) > 0
            last = n if written else n - 1
    for name in store.list_names(directory):
        k = parse_data_file_name(name, extension)
        if k is not None:
            last = max(last, k)
    return last + 1
