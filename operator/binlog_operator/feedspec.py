"""The changefeeds a BinlogCluster declares (``captures.changefeeds[]``): parsing, the sink URL
each one gets, and the plan that brings the capture cluster's changefeeds to them (pure).

A changefeed names its sink either as ``sinkURI`` (a URL without a password: it is stored in the
cluster's spec) or as ``kafka`` (brokers, topic, TiCDC protocol and options, SASL credentials and
TLS files from Secrets, as a drainer's ``kafka`` block). The operator reads the SASL Secret and
puts the user and password in the URL's user part (the capture cluster keeps the sink URL in
etcd, as TiCDC does, and every view of it masks the password); the TLS Secret is mounted in the
capture pods at ``KAFKA_TLS_DIR/<secret>``, and the URL names those files; a claim-check
PersistentVolumeClaim (open-protocol's large messages) is mounted at ``feedkafka.claim_dir``, and
the URL's ``claim-check-storage-uri`` is a directory in it (``feedkafka`` parses the block).

A changefeed into the storage sink (``sinkURI: file:///...?protocol=csv``, TiCDC's storage
sink on a directory) names the PersistentVolumeClaim that holds the directory in
``storageVolumeClaim``: the capture pods mount it at ``storage_dir(claim)`` and the URL's path
must be that directory or one under it, so whichever capture runs the changefeed writes to the
same files (ReadWriteMany with more than one capture). The URL's options are checked as the
capture checks them.

Sync points (TiCDC's ``enable-sync-point``, a SQL sink only) are ``enableSyncPoint``,
``syncPointInterval`` and ``syncPointRetention`` (Go durations, TiCDC's minimums 30s and 1h);
they go into the changefeed's replica config under TiCDC's keys, so a change to them updates
the changefeed as a change of ``config`` does.

Invariants: only changefeeds the operator created (``managed``, kept in the cluster's status) are
ever removed, so a changefeed made with ``binlog-cdc cli`` is left alone; a changefeed is updated
(paused, its sink and config replaced, resumed if it ran) only when its sink URL differs from the
declared one or its declared config changed since the operator applied it; nothing is done twice
for one difference.

Worked example: declared ``{id: orders, kafka: {brokers: [k:9092], topic: o, protocol:
canal-json, sasl: {secretName: ku}}}`` with Secret ``ku`` = ``{username: app, password: p/w}``
gives the URL ``kafka://app:p%2Fw@k:9092/o?protocol=canal-json``. If the capture cluster has no
``orders``, the plan is ``create``; if it has it with another topic, ``update``; once ``orders``
leaves the spec while ``managed`` lists it, ``remove``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

from binlog_operator.feedkafka import FeedKafka, parse_feed_kafka
from binlog_operator.kafkasink import KAFKA_TLS_DIR
from tributary.cdc.errors import BadRecord
from tributary.cdc.syncpoint import (
    DEFAULT_INTERVAL_NS,
    DEFAULT_RETENTION_NS,
    check_settings,
    parse_duration_ns,
)
from tributary.errors import TributaryError
from tributary.sinks.storage import is_storage_url
from tributary.sinks.storage.settings import parse_url as storage_url

_ID = re.compile(r"^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$")  # TiCDC's changefeed id rule
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_URL_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@?#]*:[^/@?#]*@")
_SYNC_FIELDS = {  # the changefeed's field -> TiCDC's replica config key
    "enableSyncPoint": "enable-sync-point",
    "syncPointInterval": "sync-point-interval",
    "syncPointRetention": "sync-point-retention",
}
_FIELDS = {"id", "sinkURI", "kafka", "startTS", "config", "storageVolumeClaim", *_SYNC_FIELDS}
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a PersistentVolumeClaim name
STORAGE_DIR = "/var/lib/binlog/storage"  # where the capture pods mount storage sink claims
_SQL_SINK = re.compile(r"^mysql://", re.IGNORECASE)  # the sinks with a sync point table


@dataclass(frozen=True)
class FeedSpec:
    id: str
    sink_uri: str = ""  # "" when ``kafka`` names the sink
    kafka: FeedKafka | None = None
    start_ts: int = 0  # 0: now (only used when the changefeed is created)
    config: Mapping[str, Any] = field(default_factory=dict)  # TiCDC replica config, as given
    storage_claim: str = ""  # the PersistentVolumeClaim of a storage sink's directory ("": none)

    @property
    def config_hash(self) -> str:
        """A fingerprint of the declared config: the part of a changefeed etcd cannot compare."""
        raw = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


def parse_feeds(raw: object, problems: list[str]) -> tuple[FeedSpec, ...]:
    """``captures.changefeeds``; every problem appended to ``problems``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append("captures.changefeeds: must be a list")
        return ()
    feeds = tuple(_feed(f, f"captures.changefeeds[{i}]", problems) for i, f in enumerate(raw))
    ids = [f.id for f in feeds]
    problems += [
        f"captures.changefeeds: id {i!r} is used twice"
        for i in sorted(set(ids))
        if ids.count(i) > 1
    ]
    return feeds


def _feed(raw: object, where: str, problems: list[str]) -> FeedSpec:
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, not {type(raw).__name__}")
        return FeedSpec(id="")
    f = dict(raw)
    problems += [f"{where}.{u}: unknown field" for u in sorted(set(f) - _FIELDS)]
    feed_id = str(f.get("id") or "")
    if not _ID.match(feed_id) or len(feed_id) > 128:
        problems.append(
            f"{where}.id: {feed_id!r} must be letters and digits, with single '-' between them"
        )
    sink = str(f.get("sinkURI") or "")
    kafka = parse_feed_kafka(f.get("kafka"), feed_id, f"{where}.kafka", problems)
    if sink and kafka is not None:
        problems.append(f"{where}: sinkURI and kafka name the sink twice; give one of them")
    elif not sink and kafka is None:
        problems.append(f"{where}: a sink is required (sinkURI or kafka)")
    elif sink and not _URL.match(sink):
        problems.append(f"{where}.sinkURI: {sink!r} must be a URL such as mysql://user@host:3306/")
    elif sink and _URL_PASSWORD.match(sink):
        problems.append(
            f"{where}.sinkURI: a URL with a password would be stored in the spec; use kafka with "
            "sasl.secretName (a Secret) instead"
        )
        sink = ""
    start = f.get("startTS", 0)
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        problems.append(f"{where}.startTS: {start!r} must be a non-negative integer")
        start = 0
    config = f.get("config") or {}
    if not isinstance(config, Mapping):
        problems.append(f"{where}.config: must be an object (TiCDC's replica config)")
        config = {}
    sync = _sync_points(f, where, problems, sql=bool(_SQL_SINK.match(sink)), config=config)
    claim = _storage_claim(f.get("storageVolumeClaim"), sink, where, problems)
    return FeedSpec(feed_id, sink, kafka, start, {**config, **sync}, claim)


def storage_dir(claim: str) -> str:
    """Where the capture pods mount a storage sink's PersistentVolumeClaim."""
    return f"{STORAGE_DIR}/{claim}"


def _storage_claim(claim: object, sink: str, where: str, problems: list[str]) -> str:
    """A storage sink's claim: its name, and a sinkURI of the storage sink inside it."""
    if claim is None:
        return ""
    if not isinstance(claim, str) or not _CLAIM.match(claim):
        problems.append(
            f"{where}.storageVolumeClaim: {claim!r} is not a PersistentVolumeClaim name"
        )
        return ""
    parts = urlsplit(sink)
    if parts.scheme != "file" or not is_storage_url(parts):
        problems.append(
            f"{where}.storageVolumeClaim: only with a storage sink, a sinkURI such as "
            f"file://{storage_dir(claim)}?protocol=csv"
        )
        return ""
    directory = storage_dir(claim)
    path = unquote(parts.netloc + parts.path).rstrip("/")
    if path != directory and not path.startswith(directory + "/"):
        problems.append(
            f"{where}.sinkURI: {sink!r} must be file://{directory} or a directory under it "
            "(where the capture pods mount storageVolumeClaim)"
        )
        return ""
    try:
        storage_url(parts)
    except TributaryError as e:
        problems.append(f"{where}.sinkURI: {e}")
        return ""
    return claim


def _sync_points(
    f: Mapping[str, Any], where: str, problems: list[str], *, sql: bool, config: Mapping[str, Any]
) -> dict[str, Any]:
    """The replica config keys of ``enableSyncPoint``, ``syncPointInterval`` and
    ``syncPointRetention``, checked as TiCDC checks them; {} when none is given."""
    given = {k: f[k] for k in _SYNC_FIELDS if k in f}
    if not given:
        return {}
    spelled = {str(k).replace("_", "-") for k in config}
    problems += [
        f"{where}.config.{key}: set by {where}.{name}, remove it"
        for name, key in _SYNC_FIELDS.items()
        if name in given and key in spelled
    ]
    enabled = given.get("enableSyncPoint", False)
    if not isinstance(enabled, bool):
        problems.append(f"{where}.enableSyncPoint: {enabled!r} must be true or false")
        enabled = False
    ns = {"syncPointInterval": DEFAULT_INTERVAL_NS, "syncPointRetention": DEFAULT_RETENTION_NS}
    for name in ns:
        if name in given:
            try:
                ns[name] = parse_duration_ns(given[name], f"{where}.{name}")
            except BadRecord as e:
                problems.append(str(e))
    if enabled:
        try:
            check_settings(ns["syncPointInterval"], ns["syncPointRetention"])
        except BadRecord as e:
            problems.append(f"{where}: {e}")
        if not sql:
            problems.append(
                f"{where}.enableSyncPoint: sync points are written into a MySQL, MariaDB or "
                "TiDB downstream: sinkURI must be a mysql:// URL"
            )
    return {_SYNC_FIELDS[k]: v for k, v in given.items()}


def tls_dir(secret: str) -> str:
    """Where the capture pods mount a changefeed's TLS Secret."""
    return f"{KAFKA_TLS_DIR}/{secret}"


def tls_secrets(feeds: tuple[FeedSpec, ...]) -> dict[str, tuple[str, ...]]:
    """{TLS Secret: its keys the URLs name}, for the capture pods' volumes."""
    found: dict[str, set[str]] = {}
    for f in feeds:
        t = f.kafka.tls if f.kafka is not None else None
        if t is not None:
            found.setdefault(t.secret, set()).update(
                k for k in (t.ca_key, t.cert_key, t.key_key) if k
            )
    return {s: tuple(sorted(keys)) for s, keys in sorted(found.items())}


def storage_claims(feeds: tuple[FeedSpec, ...]) -> tuple[str, ...]:
    """The storage sink claims the changefeeds name, each once, for the capture pods' volumes."""
    return tuple(sorted({f.storage_claim for f in feeds} - {""}))


def claim_check_claims(feeds: tuple[FeedSpec, ...]) -> tuple[str, ...]:
    """The claim-check PersistentVolumeClaims the changefeeds name, each once, for the capture
    pods' volumes."""
    return tuple(sorted({f.kafka.claim_check_claim for f in feeds if f.kafka} - {""}))


def sink_uri(f: FeedSpec, credentials: tuple[str, str] | None = None) -> str:
    """The URL the changefeed is created with; ``credentials`` = (user, password) read from the
    SASL Secret (required when the feed has ``kafka.sasl``)."""
    k = f.kafka
    if k is None:
        return f.sink_uri
    user = ""
    if k.sasl is not None:
        if credentials is None:
            raise ValueError(f"changefeed {f.id}: the SASL credentials are needed")
        name, password = credentials
        user = f"{quote(name, safe='')}:{quote(password, safe='')}@"
    query: list[tuple[str, str]] = [("protocol", k.protocol), *k.options]
    if k.sasl is not None:
        query.append(("sasl-mechanism", k.sasl.mechanism))
    if k.tls is not None:
        d = tls_dir(k.tls.secret)
        query += [("enable-tls", "true"), ("ca", f"{d}/{k.tls.ca_key}")]
        if k.tls.cert_key:
            query += [("cert", f"{d}/{k.tls.cert_key}"), ("key", f"{d}/{k.tls.key_key}")]
    topic = quote(k.topic, safe="")
    return f"kafka://{user}{','.join(k.brokers)}/{topic}?{urlencode(query)}"


@dataclass(frozen=True)
class Actual:
    """A changefeed as the capture cluster holds it."""

    id: str
    sink_uri: str
    state: str


@dataclass(frozen=True)
class Action:
    """One step: ``create``, ``update`` (pause if running, replace, resume unless it was
    paused by hand) or ``remove``."""

    kind: str
    id: str
    sink_uri: str = ""
    feed: FeedSpec | None = None
    pause: bool = False  # update: pause first (it runs)
    resume: bool = False  # update: resume after (it ran, or failed)


_STOPPED = ("stopped", "failed")  # states an update is accepted in without pausing first
_DONE = ("finished", "removed")


def plan(
    wanted: Mapping[str, tuple[FeedSpec, str]],
    actual: Mapping[str, Actual],
    managed: Mapping[str, str],
) -> list[Action]:
    """The steps from ``actual`` to ``wanted`` ({id: (feed, its sink URL)}); ``managed`` is
    {id: config hash} of the changefeeds the operator applied. Creations and updates in id
    order, then removals."""
    steps: list[Action] = []
    for feed_id in sorted(wanted):
        feed, uri = wanted[feed_id]
        have = actual.get(feed_id)
        if have is None:
            steps.append(Action("create", feed_id, uri, feed))
            continue
        if have.state in _DONE:
            continue  # TiCDC refuses to update a finished changefeed; status shows it
        config_changed = feed_id in managed and managed[feed_id] != feed.config_hash
        if have.sink_uri != uri or config_changed:
            pause = have.state not in _STOPPED
            steps.append(Action("update", feed_id, uri, feed, pause, have.state != "stopped"))
    steps += [
        Action("remove", feed_id)
        for feed_id in sorted(managed)
        if feed_id not in wanted and feed_id in actual
    ]
    return steps


def still_managed(
    wanted: Mapping[str, tuple[FeedSpec, str]],
    actual: Mapping[str, Actual],
    managed: Mapping[str, str],
    applied: Mapping[str, str],
    removed: set[str],
) -> dict[str, str]:
    """The ``managed`` record after a pass that applied ``applied`` ({id: config hash}) and
    removed ``removed``: a declared changefeed the capture cluster has is managed (one found
    there already is adopted with its declared config), a failed step leaves the record as it
    was (so it is tried again), and one gone from both spec and capture cluster is forgotten."""
    kept = {i: h for i, h in managed.items() if (i in actual or i in applied) and i not in removed}
    for feed_id, (feed, _) in wanted.items():
        if feed_id in applied:
            kept[feed_id] = applied[feed_id]
        elif feed_id in actual and feed_id not in kept:
            kept[feed_id] = feed.config_hash
    return {i: kept[i] for i in sorted(kept)}
