"""TiCDC's storage sink on a directory, ``file:///DIR?protocol=csv`` (or ``canal-json``), or
on an S3 bucket prefix, ``s3://BUCKET/PREFIX?protocol=csv&endpoint=http://HOST:PORT``.

A ``file://`` URL with a ``protocol`` parameter opens this sink; without one it is tidb-binlog's
file sink (``sinks.file``). ``settings`` reads the URL, ``layout`` names the files as TiCDC
does, ``tabledef`` writes and reads TiCDC's table definitions, ``csvcodec`` TiCDC's CSV,
``split`` splits key-changing updates, ``versions`` decides table versions, ``store`` is where
files go (``files`` a directory, ``s3`` a bucket, botocore imported only then; ``errors`` its
errors), ``reader``
reads them back and ``sink`` is the sink. ``gcs://`` and ``azure://`` are not implemented (a
directory on a shared file system is what TiCDC calls NFS).
"""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qsl


def is_storage_url(url: SplitResult) -> bool:
    """Whether a URL names this sink: ``s3://``, or ``file://`` with a ``protocol``."""
    if url.scheme.lower() == "s3":
        return True
    return any(k == "protocol" for k, _ in parse_qsl(url.query, keep_blank_values=True))
