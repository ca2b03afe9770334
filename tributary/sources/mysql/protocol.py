"""A minimal MySQL client connection for the binlog dump: handshake, auth, commands, packets.

Only what a replica needs: the v10 handshake with ``mysql_native_password`` (MariaDB's
default) or ``caching_sha2_password`` in its fast path (MySQL 8's default once the user has
logged in before; its full path needs TLS and is refused with a clear error), COM_QUERY for
statements that answer OK, and raw packet reads for the dump stream. Queries with result sets
go through the regular driver (``mysqlsource.server``).

Invariant: a packet is read whole (a payload of 2^24-1 bytes continues in the next packet and
is joined), and every I/O failure surfaces as ``ConnectionLost`` (retriable), every error
packet as ``ServerError`` with its code.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import struct

from tributary.sources.mysql.errors import ConnectionLost, ServerError, SourceError

log = logging.getLogger(__name__)

MAX_PAYLOAD = 0xFFFFFF
COM_QUERY = 0x03
COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15

_CAPS = (
    0x00000001  # CLIENT_LONG_PASSWORD (CLIENT_MYSQL for MariaDB)
    | 0x00000004  # CLIENT_LONG_FLAG
    | 0x00000200  # CLIENT_PROTOCOL_41
    | 0x00002000  # CLIENT_TRANSACTIONS
    | 0x00008000  # CLIENT_SECURE_CONNECTION
    | 0x00020000  # CLIENT_MULTI_RESULTS
    | 0x00080000  # CLIENT_PLUGIN_AUTH
    | 0x00200000  # CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
)
_UTF8MB4_GENERAL_CI = 45


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def scramble_native(password: str, nonce: bytes) -> bytes:
    """mysql_native_password: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw)))."""
    if not password:
        return b""
    h1 = hashlib.sha1(password.encode()).digest()
    h2 = hashlib.sha1(h1).digest()
    return _xor(h1, hashlib.sha1(nonce[:20] + h2).digest())


def scramble_sha256(password: str, nonce: bytes) -> bytes:
    """caching_sha2_password fast path: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce)."""
    if not password:
        return b""
    h1 = hashlib.sha256(password.encode()).digest()
    h2 = hashlib.sha256(h1).digest()
    return _xor(h1, hashlib.sha256(hashlib.sha256(h2).digest() + nonce[:20]).digest())


def _scramble(plugin: str, password: str, nonce: bytes) -> bytes:
    if plugin == "mysql_native_password":
        return scramble_native(password, nonce)
    if plugin == "caching_sha2_password":
        return scramble_sha256(password, nonce)
    raise SourceError(f"authentication plugin {plugin!r} is not supported by the binlog reader")


def error_from(payload: bytes) -> ServerError:
    """An ERR packet (0xFF, code, optional '#' + SQL state, message) as a ServerError."""
    code = int.from_bytes(payload[1:3], "little")
    msg = payload[3:]
    if msg[:1] == b"#":
        msg = msg[6:]
    return ServerError(code, msg.decode("utf-8", "replace"))


class Connection:
    """One TCP connection speaking the client protocol; use ``Connection.open``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._seq = 0
        self.server_version = ""
        self.connection_id = 0

    @classmethod
    async def open(
        cls, host: str, port: int, user: str, password: str, *, connect_timeout: float = 10.0
    ) -> Connection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=1 << 20), connect_timeout
            )
        except (OSError, TimeoutError) as e:
            raise ConnectionLost(f"cannot connect to {host}:{port}: {e!r}") from e
        conn = cls(reader, writer)
        try:
            await asyncio.wait_for(conn._handshake(user, password), connect_timeout)
        except BaseException as e:
            conn.close()
            if isinstance(e, TimeoutError):
                raise ConnectionLost(f"handshake with {host}:{port} timed out") from e
            raise
        return conn

    async def _handshake(self, user: str, password: str) -> None:
        hello = await self.read_packet()
        if hello[:1] == b"\xff":
            raise error_from(hello)
        if hello[0] != 10:
            raise SourceError(f"unsupported MySQL protocol version {hello[0]}")
        end = hello.index(b"\0", 1)
        self.server_version = hello[1:end].decode("utf-8", "replace")
        p = end + 1
        self.connection_id = int.from_bytes(hello[p : p + 4], "little")
        nonce = hello[p + 4 : p + 12]
        p += 13
        caps = int.from_bytes(hello[p : p + 2], "little")
        p += 5
        caps |= int.from_bytes(hello[p : p + 2], "little") << 16
        p += 2
        nonce_len = hello[p]
        p += 11
        plugin = "mysql_native_password"
        if caps & 0x8000:
            part2 = max(13, nonce_len - 8)
            nonce += hello[p : p + part2].rstrip(b"\0")
            p += part2
        if caps & 0x80000 and p < len(hello):
            plugin = hello[p:].split(b"\0", 1)[0].decode()
        auth = _scramble(plugin, password, nonce)
        response = (
            struct.pack("<IIB23x", _CAPS, MAX_PAYLOAD, _UTF8MB4_GENERAL_CI)
            + user.encode()
            + b"\0"
            + bytes((len(auth),))
            + auth
            + plugin.encode()
            + b"\0"
        )
        self.write_packet(response, seq=self._seq)
        await self._auth_result(plugin, password, nonce)

    async def _auth_result(self, plugin: str, password: str, nonce: bytes) -> None:
        while True:
            reply = await self.read_packet()
            head = reply[:1]
            if head == b"\x00":
                return
            if head == b"\xff":
                raise error_from(reply)
            if head == b"\xfe":  # auth switch: plugin name, then new nonce
                name, _, data = reply[1:].partition(b"\0")
                plugin, nonce = name.decode(), data.rstrip(b"\0")
                self.write_packet(_scramble(plugin, password, nonce), seq=self._seq)
            elif head == b"\x01" and reply[1:2] == b"\x03":
                continue  # caching_sha2 fast auth succeeded; an OK packet follows
            elif head == b"\x01" and reply[1:2] == b"\x04":
                raise SourceError(
                    "caching_sha2_password needs a full authentication (TLS or RSA), which the "
                    "binlog reader does not do: use a mysql_native_password user or log in "
                    "once with the mysql client first"
                )
            else:
                raise SourceError(f"unexpected authentication packet {reply[:8]!r}")

    @property
    def reader(self) -> asyncio.StreamReader:
        """The socket's reader, for a command that streams packets (the binlog dump)."""
        return self._reader

    def write_packet(self, payload: bytes, *, seq: int = 0) -> None:
        """Send ``payload`` as one packet (commands are far below 16 MiB)."""
        self._writer.write(len(payload).to_bytes(3, "little") + bytes((seq & 0xFF,)) + payload)
        self._seq = seq + 1

    async def command(self, code: int, body: bytes = b"") -> None:
        """Send a command packet (sequence 0)."""
        self.write_packet(bytes((code,)) + body, seq=0)
        try:
            await self._writer.drain()
        except OSError as e:
            raise ConnectionLost(f"lost the connection: {e!r}") from e

    async def execute(self, sql: str) -> None:
        """COM_QUERY for a statement with no result set (SET ...); raises on an error packet."""
        await self.command(COM_QUERY, sql.encode())
        reply = await self.read_packet()
        if reply[:1] == b"\xff":
            raise error_from(reply)
        if reply[:1] != b"\x00":
            raise SourceError(f"{sql!r} returned a result set; expected OK")

    async def read_packet(self) -> bytes:
        """The next packet's payload, joined across 16 MiB continuation packets."""
        read = self._reader.readexactly
        try:
            head = await read(4)
            n = head[0] | head[1] << 8 | head[2] << 16
            self._seq = head[3] + 1
            payload = await read(n)
            if n < MAX_PAYLOAD:
                return payload
            parts = [payload]
            while n == MAX_PAYLOAD:
                head = await read(4)
                n = head[0] | head[1] << 8 | head[2] << 16
                parts.append(await read(n))
            self._seq = head[3] + 1
            return b"".join(parts)
        except asyncio.IncompleteReadError as e:
            raise ConnectionLost("the server closed the connection") from e
        except OSError as e:
            raise ConnectionLost(f"lost the connection: {e!r}") from e

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        self.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass  # already broken: nothing left to release
