"""Binlog event framing and the small events: header, FORMAT_DESCRIPTION, ROTATE, QUERY, XID,
GTID (MySQL) and GTID (MariaDB).

Every event starts with a 19-byte header: timestamp (seconds, u32), type (u8), server id (u32),
event size (u32), log_pos (u32: the offset of the *next* event in the file; 0 in the fake
events a dump sends first) and flags (u16). With ``binlog_checksum=CRC32`` the last 4 bytes of
an event are the CRC32 of the rest. These parsers take the event without its checksum.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from tributary.sources.mysql.errors import MalformedEvent
from tributary.sources.mysql.position import Position

HEADER = 19
QUERY_EVENT = 2
STOP_EVENT = 3
ROTATE_EVENT = 4
FORMAT_DESCRIPTION_EVENT = 15
XID_EVENT = 16
TABLE_MAP_EVENT = 19
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
HEARTBEAT_EVENT = 27
HEARTBEAT_V2_EVENT = 41
ARTIFICIAL_FLAG = 0x20  # a fake event the dump made up (its log_pos is not ours)
WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2 = 30, 31, 32
GTID_EVENT = 33
MARIADB_ANNOTATE_ROWS = 160
MARIADB_GTID_EVENT = 162
MARIADB_GTID_LIST = 163
MARIADB_QUERY_COMPRESSED = 165
MARIADB_ROWS_COMPRESSED = frozenset(range(166, 172))
PARTIAL_UPDATE_ROWS = 39  # MySQL's JSON partial updates (binlog_row_value_options)
TRANSACTION_PAYLOAD_EVENT = 40  # MySQL's compressed transaction (payload.py)
IGNORABLE_FLAG = 0x80  # LOG_EVENT_IGNORABLE_F: a reader that does not know the type may skip it

ROWS_EVENTS = frozenset(
    {WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1, WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2}
)
UNSUPPORTED = MARIADB_ROWS_COMPRESSED | {MARIADB_QUERY_COMPRESSED, PARTIAL_UPDATE_ROWS}

# Every event type by name (MySQL's Log_event_type, MariaDB's additions), for errors.
NAMES: dict[int, str] = {
    1: "START_EVENT_V3", 2: "QUERY_EVENT", 3: "STOP_EVENT", 4: "ROTATE_EVENT",
    5: "INTVAR_EVENT", 6: "LOAD_EVENT", 7: "SLAVE_EVENT", 8: "CREATE_FILE_EVENT",
    9: "APPEND_BLOCK_EVENT", 10: "EXEC_LOAD_EVENT", 11: "DELETE_FILE_EVENT",
    12: "NEW_LOAD_EVENT", 13: "RAND_EVENT", 14: "USER_VAR_EVENT",
    15: "FORMAT_DESCRIPTION_EVENT", 16: "XID_EVENT", 17: "BEGIN_LOAD_QUERY_EVENT",
    18: "EXECUTE_LOAD_QUERY_EVENT", 19: "TABLE_MAP_EVENT", 20: "PRE_GA_WRITE_ROWS_EVENT",
    21: "PRE_GA_UPDATE_ROWS_EVENT", 22: "PRE_GA_DELETE_ROWS_EVENT", 23: "WRITE_ROWS_EVENT_V1",
    24: "UPDATE_ROWS_EVENT_V1", 25: "DELETE_ROWS_EVENT_V1", 26: "INCIDENT_EVENT",
    27: "HEARTBEAT_LOG_EVENT", 28: "IGNORABLE_LOG_EVENT", 29: "ROWS_QUERY_LOG_EVENT",
    30: "WRITE_ROWS_EVENT", 31: "UPDATE_ROWS_EVENT", 32: "DELETE_ROWS_EVENT",
    33: "GTID_LOG_EVENT", 34: "ANONYMOUS_GTID_LOG_EVENT", 35: "PREVIOUS_GTIDS_LOG_EVENT",
    36: "TRANSACTION_CONTEXT_EVENT", 37: "VIEW_CHANGE_EVENT", 38: "XA_PREPARE_LOG_EVENT",
    39: "PARTIAL_UPDATE_ROWS_EVENT", 40: "TRANSACTION_PAYLOAD_EVENT",
    41: "HEARTBEAT_LOG_EVENT_V2", 42: "GTID_TAGGED_LOG_EVENT",
    160: "ANNOTATE_ROWS_EVENT", 161: "BINLOG_CHECKPOINT_EVENT", 162: "GTID_EVENT (MariaDB)",
    163: "GTID_LIST_EVENT", 164: "START_ENCRYPTION_EVENT", 165: "QUERY_COMPRESSED_EVENT",
    166: "WRITE_ROWS_COMPRESSED_EVENT_V1", 167: "UPDATE_ROWS_COMPRESSED_EVENT_V1",
    168: "DELETE_ROWS_COMPRESSED_EVENT_V1", 169: "WRITE_ROWS_COMPRESSED_EVENT",
    170: "UPDATE_ROWS_COMPRESSED_EVENT", 171: "DELETE_ROWS_COMPRESSED_EVENT",
}  # fmt: skip

# Types known to carry nothing a row-based replica needs: STOP, statement-context events that
# only matter to statement-based DML (which ``inspect`` rules out), comments (ROWS_QUERY,
# ANNOTATE_ROWS, IGNORABLE), GTID bookkeeping, group-replication markers, MariaDB's
# checkpoints and encryption start (a dump sends events decrypted). Any type that is neither
# handled nor listed here stops the source with an error naming it, unless the server flagged
# the event LOG_EVENT_IGNORABLE_F.
HARMLESS = frozenset({3, 5, 13, 14, 28, 29, 34, 35, 36, 37, 160, 161, 163, 164})


def name(tp: int) -> str:
    """``"TABLE_MAP_EVENT (19)"``: the type's name and number, for errors and logs."""
    return f"{NAMES.get(tp, 'UNKNOWN_EVENT')} ({tp})"


_HEAD = struct.Struct("<IBIIIH")
_FL_STANDALONE = 1  # MariaDB GTID flag: a DDL or other statement with no BEGIN/COMMIT
_FL_GROUP_COMMIT_ID = 2


def header(event: bytes) -> tuple[int, int, int, int, int]:
    """(timestamp, type, server_id, event_size, log_pos) of ``event``."""
    ts, tp, server_id, size, log_pos, _flags = _HEAD.unpack_from(event)
    return ts, tp, server_id, size, log_pos


def check_crc32(event: bytes) -> bytes:
    """``event`` without its trailing CRC32, after checking it."""
    body = event[:-4]
    if zlib.crc32(body) != int.from_bytes(event[-4:], "little"):
        _ts, tp, _sid, _size, log_pos = header(event)
        raise MalformedEvent(f"CRC32 mismatch in event type {tp} ending at {log_pos}")
    return body


def heartbeat_position(raw: bytes, checksum: bool) -> Position | None:
    """Where a heartbeat (v1: header log_pos, the file name as body) says the dump stands;
    None for a v2 heartbeat or a v1 without a name. A heartbeat's CRC32 is dropped when it
    has a valid one (servers differ in whether they add it)."""
    if raw[4] != HEARTBEAT_EVENT or len(raw) <= HEADER:
        return None
    body = raw[HEADER:]
    if checksum and len(body) > 4 and zlib.crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little"):
        body = body[:-4]
    _ts, _tp, _sid, _size, log_pos = header(raw)
    name = body.decode("utf-8", "replace")
    if not name or ":" in name or "@" in name:
        return None
    return Position(name, log_pos)


@dataclass(frozen=True, slots=True)
class FormatDescription:
    binlog_version: int
    server_version: str
    post_header_len: bytes  # index type-1
    checksum: bool  # events of this file end in a CRC32

    def post_header(self, tp: int) -> int:
        return self.post_header_len[tp - 1] if 0 < tp <= len(self.post_header_len) else 0


def parse_format_description(event: bytes) -> FormatDescription:
    """FORMAT_DESCRIPTION (with its checksum still on, when it has one): version 4 layout,
    then one post-header length per event type, then the checksum algorithm byte."""
    body = event[HEADER:]
    if len(body) < 57:
        raise MalformedEvent("FORMAT_DESCRIPTION event too short")
    version = int.from_bytes(body[0:2], "little")
    server = body[2:52].split(b"\0", 1)[0].decode("ascii", "replace")
    if body[56] != HEADER:
        raise MalformedEvent(f"event header length {body[56]}, expected {HEADER}")
    # Servers that know checksums (MySQL >= 5.6.1, MariaDB >= 5.3) append alg + crc (5 bytes).
    alg = body[-5]
    post = body[57:-5]
    checksum = alg == 1
    if checksum:
        check_crc32(event)
    elif alg not in (0, 0xFF):
        raise MalformedEvent(f"unknown binlog checksum algorithm {alg}")
    return FormatDescription(version, server, post, checksum)


def parse_rotate(event: bytes) -> tuple[str, int]:
    """ROTATE: (next file, position in it)."""
    pos = int.from_bytes(event[HEADER : HEADER + 8], "little")
    return event[HEADER + 8 :].decode("utf-8", "replace"), pos


@dataclass(frozen=True, slots=True)
class Query:
    schema: str
    query: str


def parse_query(event: bytes, post_header_len: int) -> Query:
    """QUERY: post header (thread id, exec time, db length, error code, status vars length),
    status vars, the NUL-terminated default database, then the statement."""
    p = HEADER
    db_len = event[p + 8]
    status_len = int.from_bytes(event[p + 11 : p + 13], "little")
    p += post_header_len + status_len
    schema = event[p : p + db_len].decode("utf-8", "replace")
    query = event[p + db_len + 1 :].decode("utf-8", "replace")
    return Query(schema, query)


def parse_xid(event: bytes) -> int:
    return int.from_bytes(event[HEADER : HEADER + 8], "little")


@dataclass(frozen=True, slots=True)
class Gtid:
    text: str  # "domain-server-seq" (MariaDB) or "uuid:gno" (MySQL)
    standalone: bool  # MariaDB: no BEGIN/COMMIT follows (a DDL)


def parse_mariadb_gtid(event: bytes, server_id: int) -> Gtid:
    seq, domain, flags = struct.unpack_from("<QIB", event, HEADER)
    return Gtid(f"{domain}-{server_id}-{seq}", bool(flags & _FL_STANDALONE))


def parse_mysql_gtid(event: bytes) -> Gtid:
    sid = event[HEADER + 1 : HEADER + 17].hex()
    gno = int.from_bytes(event[HEADER + 17 : HEADER + 25], "little")
    uuid = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}"
    return Gtid(f"{uuid}:{gno}", False)
