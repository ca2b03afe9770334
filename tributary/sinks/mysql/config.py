"""The MySQL sink's URL: ``mysql://user:password@host:port/?option=value&...``.

* ``user`` and ``password`` may be percent-encoded (``p%40ss`` is ``p@ss``); no user means
  ``root``; the host defaults to 127.0.0.1 and the port to 3306. The URL names no database:
  tables are written as the upstream's ``schema.table``.
* ``consistent=true|false`` (default true): each batch in one downstream transaction with the
  checkpoint, or ``worker-count`` connections applying in parallel (see ``sinks.mysql``).
* ``worker-count`` (default the sink options' ``worker_count``), ``batch-size`` (default the
  options' ``batch_size``: row changes per downstream transaction of a parallel worker).
* ``time-zone`` (default ``+00:00``): the session ``time_zone``, the zone TIMESTAMP values arrive
  formatted in.
* ``checkpoint-schema`` / ``checkpoint-table`` (default ``tidb_binlog`` / ``checkpoint``).
* ``read-timeout`` (seconds, default 60): how long a statement's reply may take.
* ``retries`` (default 10): attempts after a retriable error (lost connection, deadlock, ...),
  with a backoff doubling from 0.1 s up to 3 s, before a retriable SinkError.

Unknown or repeated options, and bad values, are a SinkError naming them (all at once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote

from tributary.sinks.checkpoint import CHECKPOINT_SCHEMA, CHECKPOINT_TABLE
from tributary.sinks.mysql.conn import ConnectParams
from tributary.sinks.port import SinkError, SinkOptions
from tributary.sinks.urls import redact


@dataclass(frozen=True, slots=True)
class MysqlConfig:
    connect: ConnectParams
    consistent: bool = True
    worker_count: int = 16
    batch_size: int = 20
    checkpoint_schema: str = CHECKPOINT_SCHEMA
    checkpoint_table: str = CHECKPOINT_TABLE
    retries: int = 10


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be positive")
    return value


def _name(text: str) -> str:
    if not text:
        raise ValueError("must not be empty")
    return text


_OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "consistent": ("consistent", _bool),
    "worker-count": ("worker_count", _positive_int),
    "batch-size": ("batch_size", _positive_int),
    "time-zone": ("time_zone", _name),
    "checkpoint-schema": ("checkpoint_schema", _name),
    "checkpoint-table": ("checkpoint_table", _name),
    "read-timeout": ("read_timeout", _seconds),
    "retries": ("retries", _count),
}


def parse_url(url: SplitResult, options: SinkOptions) -> MysqlConfig:
    """The configuration ``url`` describes, defaults from ``options``."""
    problems: list[str] = []
    values: dict[str, Any] = {"worker_count": options.worker_count}
    values["batch_size"] = options.batch_size
    seen: set[str] = set()
    for key, text in parse_qsl(url.query, keep_blank_values=True):
        if key in seen:
            problems.append(f"option {key!r} given twice")
            continue
        seen.add(key)
        known = _OPTIONS.get(key)
        if known is None:
            problems.append(f"unknown option {key!r}")
            continue
        field, parse = known
        try:
            values[field] = parse(text)
        except ValueError as e:
            problems.append(f"option {key}={text!r}: {e}")
    if url.path not in ("", "/"):
        problems.append(f"a database path ({url.path!r}) is not allowed")
    try:
        port = url.port or 3306
    except ValueError as e:
        problems.append(f"bad port: {e}")
        port = 3306
    if url.fragment:
        problems.append("a fragment is not allowed")
    if problems:
        known_keys = ", ".join(sorted(_OPTIONS))
        raise SinkError(
            f"mysql sink URL {redact(url)!r}: {'; '.join(problems)} (options: {known_keys})"
        )
    params = ConnectParams(
        host=url.hostname or "127.0.0.1",
        port=port,
        user=unquote(url.username or "") or "root",
        password=unquote(url.password or ""),
        time_zone=values.pop("time_zone", "+00:00"),
        read_timeout=values.pop("read_timeout", 60.0),
    )
    return MysqlConfig(params, **values)
