"""The capture cluster's etcd key layout, after TiCDC's ``pkg/etcd/etcdkey.go``.

Invariant: ``parse`` inverts every ``*_key`` builder, so a key the cluster wrote is always
recognised when it is read back from a prefix get or a watch::

    /tidb/cdc/<cluster>/__cdc_meta__/capture/<capture-id>            CaptureInfo (lease-bound)
    /tidb/cdc/<cluster>/__cdc_meta__/owner/<lease-id-hex>            election key = capture id
    /tidb/cdc/<cluster>/<namespace>/changefeed/info/<changefeed-id>  ChangeFeedInfo
    /tidb/cdc/<cluster>/<namespace>/changefeed/status/<changefeed-id> ChangeFeedStatus
    /tidb/cdc/<cluster>/<namespace>/task/position/<capture-id>/<changefeed-id>  TaskPosition
    /tidb/cdc/<cluster>/<namespace>/task/table/<changefeed-id>/<span>   TableAssign (owner)
    /tidb/cdc/<cluster>/<namespace>/task/progress/<changefeed-id>/<span> TableProgress (processor)
    /tidb/cdc/<cluster>/__cdc_meta__/drain/<capture-id>              a drain request (ours)

A span is a table (``schema.table``), ``#ddl`` (a spread changefeed's DDLs and the rows of
tables it did not schedule) or ``*`` (a whole changefeed); in keys it is percent-encoded.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

ROOT = "/tidb/cdc"
META = "__cdc_meta__"
DEFAULT_CLUSTER = "default"
DEFAULT_NAMESPACE = "default"

_ID = re.compile(r"^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$")
MAX_ID_LENGTH = 128


def valid_id(name: str) -> bool:
    """TiCDC's rule for changefeed ids and namespaces (also applied to cluster ids)."""
    return len(name) <= MAX_ID_LENGTH and _ID.match(name) is not None


class KeyKind(enum.Enum):
    CAPTURE = "capture"
    OWNER = "owner"
    INFO = "info"
    STATUS = "status"
    TASK = "task"
    TABLE = "table"  # a span's assignment
    PROGRESS = "progress"  # a span's checkpoint
    DRAIN = "drain"


@dataclass(frozen=True, slots=True)
class FeedId:
    """A changefeed's identity: its namespace and id."""

    namespace: str
    id: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.id}"


@dataclass(frozen=True, slots=True)
class ParsedKey:
    kind: KeyKind
    name: str = ""  # capture id (CAPTURE, TASK, DRAIN), lease hex (OWNER), span (TABLE, PROGRESS)
    feed: FeedId | None = None  # INFO, STATUS, TASK, TABLE, PROGRESS


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builders for one cluster id."""

    cluster: str = DEFAULT_CLUSTER

    @property
    def prefix(self) -> bytes:
        """Everything of this cluster (what the reactors watch)."""
        return f"{ROOT}/{self.cluster}/".encode()

    @property
    def capture_prefix(self) -> bytes:
        return f"{ROOT}/{self.cluster}/{META}/capture/".encode()

    @property
    def owner_prefix(self) -> bytes:
        return f"{ROOT}/{self.cluster}/{META}/owner/".encode()

    def capture_key(self, capture_id: str) -> bytes:
        return self.capture_prefix + capture_id.encode()

    @property
    def drain_prefix(self) -> bytes:
        return f"{ROOT}/{self.cluster}/{META}/drain/".encode()

    def drain_key(self, capture_id: str) -> bytes:
        return self.drain_prefix + capture_id.encode()

    def table_key(self, feed: FeedId, span: str) -> bytes:
        return self._span_key("table", feed, span)

    def progress_key(self, feed: FeedId, span: str) -> bytes:
        return self._span_key("progress", feed, span)

    def _span_key(self, kind: str, feed: FeedId, span: str) -> bytes:
        ns, name = feed.namespace, quote(span, safe="")
        return f"{ROOT}/{self.cluster}/{ns}/task/{kind}/{feed.id}/{name}".encode()

    def info_key(self, feed: FeedId) -> bytes:
        return f"{ROOT}/{self.cluster}/{feed.namespace}/changefeed/info/{feed.id}".encode()

    def status_key(self, feed: FeedId) -> bytes:
        return f"{ROOT}/{self.cluster}/{feed.namespace}/changefeed/status/{feed.id}".encode()

    def task_key(self, capture_id: str, feed: FeedId) -> bytes:
        ns = feed.namespace
        return f"{ROOT}/{self.cluster}/{ns}/task/position/{capture_id}/{feed.id}".encode()

    def parse(self, key: bytes) -> ParsedKey | None:
        """What ``key`` is, or None for keys of no interest (meta counters, upstreams...)."""
        if not key.startswith(self.prefix):
            return None
        parts = key[len(self.prefix) :].decode(errors="replace").split("/")
        if parts[0] == META:
            if len(parts) == 3 and parts[1] == "capture":
                return ParsedKey(KeyKind.CAPTURE, parts[2])
            if len(parts) == 3 and parts[1] == "owner":
                return ParsedKey(KeyKind.OWNER, parts[2])
            if len(parts) == 3 and parts[1] == "drain":
                return ParsedKey(KeyKind.DRAIN, parts[2])
            return None
        if len(parts) == 4 and parts[1] == "changefeed" and parts[2] in ("info", "status"):
            kind = KeyKind.INFO if parts[2] == "info" else KeyKind.STATUS
            return ParsedKey(kind, feed=FeedId(parts[0], parts[3]))
        if len(parts) == 5 and parts[1:3] == ["task", "position"]:
            return ParsedKey(KeyKind.TASK, parts[3], FeedId(parts[0], parts[4]))
        if len(parts) == 5 and parts[1] == "task" and parts[2] in ("table", "progress"):
            kind = KeyKind.TABLE if parts[2] == "table" else KeyKind.PROGRESS
            return ParsedKey(kind, unquote(parts[4]), FeedId(parts[0], parts[3]))
        return None
