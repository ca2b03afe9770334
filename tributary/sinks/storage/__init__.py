"""TiCDC's storage sink on a directory: ``file:///DIR?protocol=csv`` (or ``canal-json``).

A ``file://`` URL with a ``protocol`` parameter opens this sink; without one it is tidb-binlog's
file sink (``sinks.file``). ``settings`` reads the URL, ``layout`` names the files as TiCDC
does, ``tabledef`` writes and reads TiCDC's table definitions, ``csvcodec`` TiCDC's CSV,
``split`` splits key-changing updates, ``versions`` decides table versions, ``files`` writes
files durably and ``sink`` is the sink. ``s3://``, ``gcs://`` and ``azure://`` are not
implemented (a directory on a shared file system is what TiCDC calls NFS).
"""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qsl


def is_storage_url(url: SplitResult) -> bool:
    """Whether a ``file://`` URL names this sink (it has a ``protocol``)."""
    return any(k == "protocol" for k, _ in parse_qsl(url.query, keep_blank_values=True))
