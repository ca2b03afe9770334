"""Sink implementations by URL scheme: ``open_sink("sqlite:///var/lib/tributary.db", options)``.

* ``sqlite://PATH``: the file ``PATH`` (``sqlite:///abs/x.db`` is ``/abs/x.db``,
  ``sqlite://x.db`` is ``x.db`` relative to the working directory, ``sqlite://:memory:``).
* ``blackhole://``: counts and drops.
* ``print://``: one line per row change and DDL on stdout.
* ``mysql://USER:PASSWORD@HOST:PORT/?consistent=true&worker-count=16``: MySQL, MariaDB or
  TiDB (``sinks.mysql`` lists the options). ``tidb://`` is another name for it, as in TiCDC's
  sink URLs (``scheme_of`` answers ``mysql``): the sink finds TiDB by its version either way
  (``sinks.mysql.tidb``).
* ``file:///DIR?segment-size=512MiB&retention-time=7``: tidb-binlog's binlog files of
  ``pb_binlog`` records, readable by ``reparo`` (``sinks.file``).
* ``file:///DIR?protocol=csv&flush-interval=5s&file-size=64MiB``: TiCDC's storage sink, CSV
  or ``canal-json`` files in TiCDC's layout (``sinks.storage``): a ``protocol`` decides.
* ``s3://BUCKET/PREFIX?protocol=csv&endpoint=http://HOST:PORT``: the same storage sink on an
  S3 bucket prefix (AWS or an S3-compatible service; ``sinks.storage.settings`` lists the
  parameters).
* ``kafka://HOST:PORT[,HOST:PORT]/[TOPIC]?kafka-max-message-size=1GiB``: tidb-binlog's secondary
  binlog, one message per transaction, topic ``<cluster-id>_obinlog`` by default (``sinks.kafka``).
* ``pump://ETCD_HOST:PORT[,HOST:PORT]/?name=X&cluster-id=N``: binlogs into a pump cluster, as
  TiDB writes them, for a drainer to read (``sinks.pump``).

Each backend is a subpackage whose ``sink`` module has an ``open_url`` opener; ``OPENERS`` is
the one table from scheme to opener, so a new backend is its subpackage plus one entry here.
The file and pump sinks (and Kafka's, in ``sinks.kafka``) are imported when one is opened: they
bring the etcd client, the pump client and the pb codecs, a quarter of a second of start-up
for a process that never opens one (the arbiter, reparo). The sink is closed when the context
ends, whatever happened inside it.

``open_sync_point_store`` opens the sync point table of a SQL sink's downstream
(``sinks.syncpoints``), for the ``SYNC_POINT_SCHEMES`` only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import SplitResult, urlsplit

from tributary.sinks import kafka
from tributary.sinks.blackhole import sink as blackhole
from tributary.sinks.mysql import sink as mysql
from tributary.sinks.mysql.config import parse_url as mysql_url
from tributary.sinks.mysql.syncpoint import MysqlSyncPointStore
from tributary.sinks.port import Sink, SinkError, SinkOptions
from tributary.sinks.print import sink as printer
from tributary.sinks.sqlite import sink as sqlite
from tributary.sinks.storage import is_storage_url
from tributary.sinks.storage.settings import parse_url as storage_url
from tributary.sinks.syncpoints import SYNC_POINT_SCHEMES, SyncPointOptions, SyncPointStore
from tributary.sinks.urls import redact

Opener = Callable[[SplitResult, SinkOptions], Awaitable[Sink]]

__all__ = ["OPENERS", "check_options", "open_sink", "open_sync_point_store", "scheme_of"]


async def _file(url: SplitResult, options: SinkOptions) -> Sink:
    if is_storage_url(url):
        from tributary.sinks.storage import sink as storage

        return await storage.open_url(url, options)
    from tributary.sinks.file import sink

    return await sink.open_url(url, options)


async def _s3(url: SplitResult, options: SinkOptions) -> Sink:
    from tributary.sinks.storage import sink as storage

    return await storage.open_url(url, options)


async def _pump(url: SplitResult, options: SinkOptions) -> Sink:
    from tributary.sinks.pump import sink

    return await sink.open_url(url, options)


# other names of a scheme: what scheme_of answers for them
ALIASES = {"tidb": "mysql"}

OPENERS: dict[str, Opener] = {
    "sqlite": sqlite.open_url,
    "blackhole": blackhole.open_url,
    "print": printer.open_url,
    "file": _file,
    "s3": _s3,
    "mysql": mysql.open_url,
    "pump": _pump,
    "kafka": kafka.open_url,
}


class BadSinkUrl(SinkError):
    """A sink URL ``urllib`` cannot read (an unclosed ``[`` in its host, say). The message does
    not repeat the URL: it cannot be parsed to mask its password."""


def _split(url: str) -> SplitResult:
    try:
        return urlsplit(url)
    except ValueError as e:
        raise BadSinkUrl(f"the sink URL is not a valid URL: {e}") from e


def _scheme(parts: SplitResult) -> str:
    scheme = parts.scheme.lower()
    return ALIASES.get(scheme, scheme)


def scheme_of(url: str) -> str:
    """The scheme of ``url``, lower case, an alias as the scheme it names (``tidb`` is
    ``mysql``); BadSinkUrl when it is not a URL."""
    return _scheme(_split(url))


def check_options(url: str) -> None:
    """The options of a sink URL that can be checked without opening the sink (a storage
    sink's: ``file://...?protocol=``, ``s3://``); a SinkError naming the problem."""
    parts = _split(url)
    if parts.scheme.lower() in ("file", "s3") and is_storage_url(parts):
        storage_url(parts)


@asynccontextmanager
async def open_sink(url: str, options: SinkOptions) -> AsyncIterator[Sink]:
    """Open the sink ``url`` names; unknown schemes are a SinkError listing the known ones."""
    parts = _split(url)
    opener = OPENERS.get(_scheme(parts))
    if opener is None:
        known = ", ".join(f"{s}://" for s in sorted(OPENERS))
        raise SinkError(f"unknown sink {redact(url)!r}: the known schemes are {known}")
    sink = await opener(parts, options)
    try:
        yield sink
    finally:
        await sink.close()


@asynccontextmanager
async def open_sync_point_store(
    url: str, options: SyncPointOptions
) -> AsyncIterator[SyncPointStore]:
    """The sync point store of the sink ``url`` (its table created if missing), closed on
    exit; a SinkError (not retriable) for a sink without one."""
    parts = _split(url)
    if _scheme(parts) not in SYNC_POINT_SCHEMES:
        raise SinkError(f"sink {redact(url)!r} has no sync point table", retriable=False)
    config = mysql_url(parts, SinkOptions(0))
    store = await MysqlSyncPointStore.open(
        config.connect, options.cluster_id, options.changefeed, options.retention
    )
    try:
        yield store
    finally:
        await store.close()
