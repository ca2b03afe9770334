"""The binlog dump connection: register as a replica, ask for the binlog from a position and
read its events in batches.

Setup on our own protocol connection (``mysqlsource.protocol``): announce that we verify
checksums (``@master_binlog_checksum``), that we understand MariaDB's GTID events
(``@mariadb_slave_capability=4``), ask for a heartbeat every ``heartbeat`` seconds when the
binlog is idle, COM_REGISTER_SLAVE, then COM_BINLOG_DUMP (blocking: the server keeps the
connection open and sends new events as they are written).

Invariant: ``read_events`` returns whole events in order, at least one per call; silence for
longer than three heartbeats, a closed socket or an error packet raise ``SourceError``
(retriable unless the server's error code says otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import struct

from tributary.sources.mysql.errors import ConnectionLost, SourceError
from tributary.sources.mysql.position import Position
from tributary.sources.mysql.protocol import (
    COM_BINLOG_DUMP,
    COM_REGISTER_SLAVE,
    MAX_PAYLOAD,
    Connection,
    error_from,
)

log = logging.getLogger(__name__)

_CHUNK = 1 << 18
_MARIA_SLAVE_CAPABILITY_GTID = 4


class BinlogDump:
    def __init__(self, conn: Connection, reader: asyncio.StreamReader, timeout: float) -> None:
        self._conn = conn
        self._reader = reader
        self._timeout = timeout
        self._buf = bytearray()
        self._parts: list[bytes] = []  # a >16 MiB event being joined
        self._failure: SourceError | None = None  # raised once the events before it are out

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        user: str,
        password: str,
        *,
        server_id: int,
        start: Position,
        heartbeat: float = 5.0,
    ) -> BinlogDump:
        conn = await Connection.open(host, port, user, password)
        try:
            await conn.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            await conn.execute(f"SET @mariadb_slave_capability = {_MARIA_SLAVE_CAPABILITY_GTID}")
            await conn.execute(f"SET @master_heartbeat_period = {int(heartbeat * 1e9)}")
            await conn.command(
                COM_REGISTER_SLAVE,
                struct.pack("<IBBBHII", server_id, 0, 0, 0, 0, 0, 0),
            )
            reply = await conn.read_packet()
            if reply[:1] == b"\xff":
                raise error_from(reply)
            body = struct.pack("<IHI", start.pos, 0, server_id) + start.file.encode()
            await conn.command(COM_BINLOG_DUMP, body)
        except BaseException:
            await conn.wait_closed()
            raise
        log.info("binlog dump from %s as replica %d", start, server_id)
        return cls(conn, conn.reader, 3 * heartbeat + 5)

    async def read_events(self) -> list[bytes]:
        """The next events (raw, checksum on), at least one."""
        while True:
            out = self._take()
            if out:
                return out
            if self._failure is not None:
                raise self._failure
            try:
                async with asyncio.timeout(self._timeout):
                    chunk = await self._reader.read(_CHUNK)
            except TimeoutError as e:
                raise ConnectionLost(
                    f"no binlog data or heartbeat for {self._timeout:.0f} s"
                ) from e
            except OSError as e:
                raise ConnectionLost(f"lost the binlog connection: {e!r}") from e
            if not chunk:
                raise ConnectionLost("the server closed the binlog connection")
            self._buf += chunk

    def _take(self) -> list[bytes]:
        buf = self._buf
        size = len(buf)
        p = 0
        out: list[bytes] = []
        with memoryview(buf) as view:
            while size - p >= 4:
                n = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
                start = p + 4
                if size - start < n:
                    break
                p = start + n
                if n < MAX_PAYLOAD and not self._parts and buf[start] == 0:
                    out.append(bytes(view[start + 1 : p]))  # the common case: one event
                    continue
                self._parts.append(bytes(view[start:p]))
                if n == MAX_PAYLOAD:
                    continue  # continued in the next packet
                payload = b"".join(self._parts)
                self._parts = []
                if payload[:1] == b"\x00":
                    out.append(payload[1:])
                else:
                    self._failure = _failure(payload)
                    break
        del buf[:p]
        return out

    async def close(self) -> None:
        await self._conn.wait_closed()


def _failure(payload: bytes) -> SourceError:
    if payload[:1] == b"\xff":
        return error_from(payload)
    if payload[:1] == b"\xfe" and len(payload) < 9:
        return SourceError("the server ended the binlog dump", retriable=True)
    return SourceError(f"unexpected packet in the binlog dump: {payload[:8]!r}")
