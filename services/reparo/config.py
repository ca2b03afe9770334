"""reparo settings: reparo.toml's keys, ``REPARO_*`` environment variables and flags.

Precedence: defaults < ``--config`` TOML file < environment < flags; every problem is reported
at once. tidb-binlog's keys: ``data-dir``, ``start-datetime``/``stop-datetime`` (local time,
``'2018-02-28 12:12:12'``), ``start-tso``/``stop-tso``, ``dest-type`` (``print`` or ``mysql``)
with ``[dest-db]``, ``safe-mode``, ``replicate-do-db``, ``[[replicate-do-table]]``,
``replicate-ignore-db``, ``[[replicate-ignore-table]]``, ``txn-batch``, ``worker-count``,
``log-level``, ``log-file``. Ours: ``dest-url`` (any sink by URL, overriding ``dest-type``),
``log-format``; a table list may also be given as ``"db.tbl,db2.~^log_"`` (so
``--replicate-do-table db.tbl``), and ``--ignore-db``/``--ignore-table`` are short flags for the
ignore lists. The commit-ts range is inclusive at both ends; a datetime wins over a tso.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

from tributary.change import FilterError, TableFilter, parse_table
from tributary.settings import STR_LIST, Kind, LogSettings, ProgressSettings, choice, group, setting
from tributary.settings.parsers import parse_str_list
from tributary.sinks.schemes import OPENERS, BadSinkUrl, scheme_of
from tributary.sinks.urls import redact
from tributary.wire import ts

DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S"
Tables = tuple[tuple[str, str], ...]


def _parse_tables(value: object) -> Tables:
    """``[{db-name = "a", tbl-name = "b"}]`` (TOML), or ``"a.b,c.d"`` / ``["a.b"]``."""
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        out = []
        for item in value:
            unknown = set(item) - {"db-name", "tbl-name"}
            db, tbl = item.get("db-name"), item.get("tbl-name")
            if unknown or not isinstance(db, str) or not isinstance(tbl, str) or not db or not tbl:
                raise ValueError(f"expected {{db-name = ..., tbl-name = ...}}, got {item!r}")
            out.append((db, tbl))
        return tuple(out)
    try:
        return tuple(parse_table(text) for text in parse_str_list(value))
    except FilterError as e:
        raise ValueError(str(e)) from e


def _render_tables(tables: Tables) -> object:
    return [{"db-name": db, "tbl-name": tbl} for db, tbl in tables]


TABLES = Kind("DB.TABLE,...", _parse_tables, _render_tables)


def datetime_to_ts(text: str) -> int:
    """``'2018-02-28 12:12:12'`` in local time -> the first TSO timestamp of that second."""
    return ts.from_seconds(dt.datetime.strptime(text.strip(), DATETIME_FORMAT).timestamp())


@dataclass(frozen=True)
class DestDbConfig:
    """``[dest-db]``: the MySQL downstream of ``dest-type = "mysql"``."""

    host: str = setting("127.0.0.1", "MySQL host")
    port: int = setting(3306, "MySQL port")
    user: str = setting("root", "MySQL user")
    password: str = setting("", "MySQL password", secret=True)


@dataclass(frozen=True)
class ReparoConfig:
    """Everything ``reparo`` can be told."""

    data_dir: str = setting("", "directory of the binlog files (the file sink's directory)")
    dest_url: str = setting(
        "",
        "destination as a URL (sqlite:///path, mysql://user:pw@host:port/, print://); "
        "empty = from dest-type and [dest-db]",
    )
    dest_type: str = setting(
        "print", "destination when dest-url is empty", kind=choice("print", "mysql")
    )
    start_datetime: str = setting("", "replay from this local time ('2018-02-28 12:12:12')")
    stop_datetime: str = setting("", "replay up to this local time ('2018-02-28 12:12:12')")
    start_tso: int = setting(0, "replay from this commit ts (inclusive); 0 = the first")
    stop_tso: int = setting(0, "replay up to this commit ts (inclusive); 0 = the last")
    replicate_do_db: tuple[str, ...] = setting(
        (), "replay only these schemas (names or ~regex)", kind=STR_LIST
    )
    replicate_do_table: Tables = setting((), "replay only these tables (db.table)", kind=TABLES)
    replicate_ignore_db: tuple[str, ...] = setting(
        (), "schemas never replayed", kind=STR_LIST, flag=("--ignore-db", "--replicate-ignore-db")
    )
    replicate_ignore_table: Tables = setting(
        (),
        "tables never replayed (db.table)",
        kind=TABLES,
        flag=("--ignore-table", "--replicate-ignore-table"),
    )
    safe_mode: bool = setting(False, "INSERT as REPLACE, UPDATE as DELETE + REPLACE")
    txn_batch: int = setting(20, "whole transactions per batch handed to the destination")
    worker_count: int = setting(
        16, "downstream connections of a parallel MySQL destination", flag=("-c", "--worker-count")
    )
    progress: ProgressSettings = group(ProgressSettings, "progress", inline=True)
    log: LogSettings = group(LogSettings, "logging", inline=True)
    dest_db: DestDbConfig = group(DestDbConfig, "the MySQL destination of dest-type mysql")

    def destination(self) -> str:
        if self.dest_url:
            return self.dest_url
        if self.dest_type == "print":
            return "print://"
        db = self.dest_db
        auth = quote(db.user, safe="") + (":" + quote(db.password, safe="") if db.password else "")
        return f"mysql://{auth}@{db.host}:{db.port}/"

    def start_ts(self) -> int:
        return datetime_to_ts(self.start_datetime) if self.start_datetime else self.start_tso

    def stop_ts(self) -> int:
        """The last commit ts to replay; 0 = no limit."""
        return datetime_to_ts(self.stop_datetime) if self.stop_datetime else self.stop_tso

    def table_filter(self) -> TableFilter:
        return TableFilter(
            do_dbs=self.replicate_do_db,
            do_tables=self.replicate_do_table,
            ignore_dbs=self.replicate_ignore_db,
            ignore_tables=self.replicate_ignore_table,
        )

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.data_dir:
            yield "data-dir", "required: the directory of the binlog files"
        try:
            scheme = scheme_of(self.destination())
        except BadSinkUrl as e:
            yield "dest-url", str(e)
        else:
            if scheme not in OPENERS:
                known = ", ".join(f"{s}://" for s in sorted(OPENERS))
                where = redact(self.destination())
                yield "dest-url", f"unknown destination {where!r}; known: {known}"
        times_ok = True
        for key, text in (
            ("start-datetime", self.start_datetime),
            ("stop-datetime", self.stop_datetime),
        ):
            try:
                if text:
                    datetime_to_ts(text)
            except ValueError:
                times_ok = False
                yield key, f"expected a local time like '2018-02-28 12:12:12', got {text!r}"
        if self.start_tso < 0 or self.stop_tso < 0:
            yield "start-tso", "start-tso and stop-tso must not be negative"
        elif times_ok and self.stop_ts() and self.stop_ts() < self.start_ts():
            yield "stop-tso", "the stop of the range is before its start"
        if self.txn_batch < 1 or self.worker_count < 1:
            yield "txn-batch", "txn-batch and worker-count must be at least 1"
        if self.progress.interval <= 0:
            yield "progress-interval", "must be positive"
        try:
            self.table_filter()
        except FilterError as e:
            yield "replicate-do-db", str(e)
