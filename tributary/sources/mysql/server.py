"""What the source asks the upstream through the regular driver (asyncmy): its configuration,
its collations and where its binlog ends.

``inspect`` checks at open that rows can be decoded from the binlog: binary logging on,
``binlog_format=ROW``, ``binlog_row_image=FULL`` and ``binlog_row_metadata=FULL`` (MariaDB >=
10.5, MySQL >= 8.0.1; without it TABLE_MAP events carry no column names and rows could only be
described with today's schema). Settings that make the server write events this source does
not read are refused here rather than mid-stream: MariaDB's ``log_bin_compress=ON`` (types
165-171) and MySQL's ``binlog_row_value_options=PARTIAL_JSON`` (type 39). MySQL's
``binlog_transaction_compression=ON`` (type 40, zstd) is read (``payload``) and reported in
``ServerInfo.compressed``. A misconfigured server is a ``ConfigurationError`` (not
retriable) naming every setting to change; a server that cannot be reached is retriable.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncmy
from asyncmy.errors import Error as DriverError

from tributary.sources.mysql.charsets import Charsets
from tributary.sources.mysql.config import SourceConfig
from tributary.sources.mysql.errors import RETRIABLE_CODES, ConfigurationError, SourceError
from tributary.sources.mysql.position import Position

log = logging.getLogger(__name__)

_CONNECT_CODES = frozenset({2002, 2003, 2005, 2006, 2013})
_UNKNOWN_VARIABLE = 1193
_SYNTAX = 1064


@dataclass(frozen=True)
class ServerInfo:
    version: str
    is_mariadb: bool
    checksum: bool  # binlog_checksum=CRC32
    charsets: Charsets
    compressed: bool = False  # binlog_transaction_compression=ON (MySQL >= 8.0.20)


def _error(e: DriverError, what: str) -> SourceError:
    code = e.args[0] if e.args and isinstance(e.args[0], int) else 0
    retriable = code in RETRIABLE_CODES or code in _CONNECT_CODES
    return SourceError(f"{what}: {e}", retriable=retriable)


async def open_connection(cfg: SourceConfig) -> Any:
    """An autocommit driver connection; SourceError when the server cannot be reached."""
    try:
        return await asyncmy.connect(
            host=cfg.host,
            port=cfg.port,
            user=cfg.user,
            password=cfg.password,
            autocommit=True,
            connect_timeout=10,
        )
    except DriverError as e:
        raise _error(e, f"cannot connect to {cfg.host}:{cfg.port}") from e
    except OSError as e:
        raise SourceError(f"cannot connect to {cfg.host}:{cfg.port}: {e!r}", retriable=True) from e


@asynccontextmanager
async def connect(cfg: SourceConfig) -> AsyncIterator[Any]:
    conn = await open_connection(cfg)
    try:
        yield conn
    finally:
        conn.close()


async def _rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    async with conn.cursor() as cur:
        await cur.execute(sql)
        return [tuple(r) for r in await cur.fetchall()]


async def _variable(conn: Any, name: str) -> str | None:
    try:
        rows = await _rows(conn, f"SELECT @@global.{name}")
    except DriverError as e:
        if e.args and e.args[0] == _UNKNOWN_VARIABLE:
            return None
        raise
    value = rows[0][0]
    return None if value is None else str(value)


async def inspect(cfg: SourceConfig) -> ServerInfo:
    """Check the server's binlog settings and load its collations."""
    async with connect(cfg) as conn:
        try:
            version = str((await _rows(conn, "SELECT VERSION()"))[0][0])
            settings = {
                name: await _variable(conn, name)
                for name in (
                    "log_bin",
                    "binlog_format",
                    "binlog_row_image",
                    "binlog_row_metadata",
                    "binlog_checksum",
                    "binlog_transaction_compression",
                    "log_bin_compress",
                    "binlog_row_value_options",
                )
            }
            collations = await _rows(
                conn,
                "SELECT c.ID, c.CHARACTER_SET_NAME, s.MAXLEN FROM information_schema.COLLATIONS c"
                " JOIN information_schema.CHARACTER_SETS s USING (CHARACTER_SET_NAME)"
                " WHERE c.ID IS NOT NULL",
            )
        except DriverError as e:
            raise _error(e, "cannot read the server's binlog settings") from e
    wrong = []
    for name, want in (
        ("log_bin", "1"),
        ("binlog_format", "ROW"),
        ("binlog_row_image", "FULL"),
        ("binlog_row_metadata", "FULL"),
    ):
        have = settings[name]
        if have is None or have.upper() not in (want, "ON" if want == "1" else want):
            wrong.append(f"{name}={have or 'unsupported'} (need {want if want != '1' else 'ON'})")
    checksum = (settings["binlog_checksum"] or "NONE").upper()
    if checksum not in ("NONE", "CRC32"):
        wrong.append(f"binlog_checksum={checksum} (need NONE or CRC32)")
    if (settings["log_bin_compress"] or "OFF").upper() in ("ON", "1"):
        wrong.append("log_bin_compress=ON (need OFF: compressed events are not read)")
    if "PARTIAL_JSON" in (settings["binlog_row_value_options"] or "").upper():
        wrong.append("binlog_row_value_options=PARTIAL_JSON (need empty)")
    if wrong:
        raise ConfigurationError(
            f"{cfg.host}:{cfg.port} ({version}) cannot be read as a change source: "
            + "; ".join(wrong)
            + " (MariaDB >= 10.5 or MySQL >= 8.0.1 with binlog_row_metadata=FULL)"
        )
    compressed = (settings["binlog_transaction_compression"] or "OFF").upper() in ("ON", "1")
    if compressed:
        log.info(
            "%s:%s compresses transactions (zstd): payloads are decompressed", cfg.host, cfg.port
        )
    return ServerInfo(
        version,
        "mariadb" in version.lower(),
        checksum == "CRC32",
        Charsets.from_rows(collations),
        compressed,
    )


async def binlog_end(conn: Any) -> Position:
    """The end of the server's binlog now (with MariaDB's GTID position, when it has one);
    driver errors pass through."""
    try:
        rows = await _rows(conn, "SHOW MASTER STATUS")
    except DriverError as e:
        if not (e.args and e.args[0] == _SYNTAX):
            raise
        rows = await _rows(conn, "SHOW BINARY LOG STATUS")  # MySQL >= 8.4
    gtid = await _variable(conn, "gtid_binlog_pos") or ""
    if not rows:
        raise ConfigurationError("the server has binary logging off")
    return Position(str(rows[0][0]), int(rows[0][1]), gtid.replace(" ", ""))


async def list_tables(cfg: SourceConfig) -> list[tuple[str, str]]:
    """Every base table of the server as ``(schema, table)``, system schemas included."""
    async with connect(cfg) as conn:
        try:
            rows = await _rows(
                conn,
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_type = 'BASE TABLE' ORDER BY 1, 2",
            )
        except DriverError as e:
            raise _error(e, "cannot list the tables") from e
    return [(str(a), str(b)) for a, b in rows]


async def current_position(cfg: SourceConfig) -> Position:
    """The end of the server's binlog now (with MariaDB's GTID position, when it has one)."""
    async with connect(cfg) as conn:
        try:
            return await binlog_end(conn)
        except DriverError as e:
            raise _error(e, "cannot read the binlog position") from e
        except ConfigurationError as e:
            raise ConfigurationError(f"{cfg.host}:{cfg.port}: {e}") from e
