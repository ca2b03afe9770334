"""What tidb-binlog's Go programs write and how they read it back, for the take-over tests.

Read from pingcap/tidb-binlog (ec3adceb): the drainer's MySQL checkpoint
(``drainer/checkpoint/mysql.go``, ``util.go``: the statements below, the row JSON from
``json.Marshal`` of ``MysqlCheckPoint``), its file checkpoint (``file.go``: BurntSushi/toml's
encoding of ``FileCheckPoint`` in ``<data-dir>/savepoint``), the node record a pump keeps in etcd
(``pkg/node/node.go``: ``json.Marshal`` of ``Status``, which ``NewStatus`` leaves with
``isAlive`` false and ``label`` null) and the pump's pull replies (``pump/storage/storage.go
PullCommitBinlog``: gogoproto bytes, ``pos`` present and empty, ``meta`` set, the commit binlog
carrying its prewrite's value and DDL fields, non-nullable fields written even when zero).

``go_read_*`` decode as Go does: ``encoding/json`` and BurntSushi/toml match keys exactly or
case-insensitively, ignore unknown keys and refuse a value of the wrong type; a missing key
leaves the zero value. ``GoStylePump`` stands in for a Go pump on the wire: WriteBinlog and
PullBinlogs of ``binlog.Pump``, answering as the Go pump does.
"""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from grpclib import GRPCError
from grpclib.const import Cardinality, Handler, Status
from grpclib.server import Server, Stream

from tributary.varint import varint
from tributary.wire.binlog import Binlog, BinlogType, PullBinlogReq, WriteBinlogReq, WriteBinlogResp
from tributary.wire.binlogext import PumpBatchBase

# -- the MySQL checkpoint -------------------------------------------------------------------


def go_checkpoint_statements(schema: str = "tidb_binlog", table: str = "checkpoint") -> list[str]:
    """``genCreateSchema`` and ``genCreateTable``, run by ``newMysql`` at every start."""
    return [
        f"create schema if not exists {schema}",
        f"create table if not exists {schema}.{table}(clusterID bigint unsigned primary key, "
        "checkPoint MEDIUMTEXT)",
    ]


def go_replace_sql(cluster_id: int, row_json: str, schema: str = "tidb_binlog") -> str:
    """``genReplaceSQL``: the JSON spliced into the statement, as tidb-binlog does."""
    return f"replace into {schema}.checkpoint values({cluster_id}, '{row_json}')"


def go_select_sql(cluster_id: int, schema: str = "tidb_binlog") -> str:
    """``genSelectSQL``."""
    return f"select checkPoint from {schema}.checkpoint where clusterID = {cluster_id}"


def go_checkpoint_json(
    commit_ts: int,
    schema_version: int,
    *,
    consistent: bool = True,
    ts_map: dict[str, int] | None = None,
) -> str:
    """``json.Marshal(MysqlCheckPoint)``: its four tagged fields in declaration order, no
    spaces; ``TsMap`` is ``make(map[string]int64)``, so ``{}`` until a TiDB downstream's
    ``primary-ts``/``secondary-ts`` are saved (Go sorts map keys)."""
    pairs = ",".join(f'"{k}":{v}' for k, v in sorted((ts_map or {}).items()))
    return (
        f'{{"consistent":{"true" if consistent else "false"},"commitTS":{commit_ts},'
        f'"ts-map":{{{pairs}}},"schema-version":{schema_version}}}'
    )


@dataclass(frozen=True)
class GoCheckpoint:
    consistent: bool = False
    commit_ts: int = 0
    ts_map: dict[str, int] = field(default_factory=dict)
    schema_version: int = 0


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _go_field(doc: dict[str, Any], tag: str) -> Any:
    """``encoding/json``'s key match: the exact tag, else one equal to it ignoring case."""
    if tag in doc:
        return doc[tag]
    return next((v for k, v in doc.items() if k.lower() == tag.lower()), None)


def _go_int64(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what}: cannot unmarshal {value!r} into int64")
    if not _INT64[0] <= value <= _INT64[1]:
        raise ValueError(f"{what}: {value} overflows int64")
    return value


def _go_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what}: cannot unmarshal {value!r} into bool")
    return value


def go_read_checkpoint(text: str) -> GoCheckpoint:
    """``json.Unmarshal`` of a checkpoint row into ``MysqlCheckPoint`` (ValueError where Go
    returns an error)."""
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    out: dict[str, Any] = {}
    if (v := _go_field(doc, "consistent")) is not None:
        out["consistent"] = _go_bool(v, "consistent")
    if (v := _go_field(doc, "commitTS")) is not None:
        out["commit_ts"] = _go_int64(v, "commitTS")
    if (v := _go_field(doc, "schema-version")) is not None:
        out["schema_version"] = _go_int64(v, "schema-version")
    if (v := _go_field(doc, "ts-map")) is not None:
        if not isinstance(v, dict):
            raise ValueError(f"ts-map: cannot unmarshal {v!r} into map[string]int64")
        out["ts_map"] = {str(k): _go_int64(x, f"ts-map.{k}") for k, x in v.items()}
    return GoCheckpoint(**out)


# -- the file checkpoint --------------------------------------------------------------------


def go_savepoint(commit_ts: int, schema_version: int, *, consistent: bool = True) -> str:
    """BurntSushi/toml's encoding of ``FileCheckPoint``: its three tagged fields in order."""
    return (
        f"consistent = {'true' if consistent else 'false'}\n"
        f"commitTS = {commit_ts}\nschema-version = {schema_version}\n"
    )


def go_read_savepoint(text: str) -> GoCheckpoint:
    """``toml.NewDecoder(file).Decode(FileCheckPoint)`` (ValueError where Go fails)."""
    doc = tomllib.loads(text)
    out: dict[str, Any] = {}
    if (v := _go_field(doc, "consistent")) is not None:
        out["consistent"] = _go_bool(v, "consistent")
    if (v := _go_field(doc, "commitTS")) is not None:
        out["commit_ts"] = _go_int64(v, "commitTS")
    if (v := _go_field(doc, "schema-version")) is not None:
        out["schema_version"] = _go_int64(v, "schema-version")
    return GoCheckpoint(**out)


# -- node records ---------------------------------------------------------------------------


def go_status_json(
    node_id: str, host: str, state: str, max_commit_ts: int, update_ts: int
) -> bytes:
    """``json.Marshal(node.Status)`` as a Go pump (or drainer) writes its record on every
    heartbeat: ``NewStatus`` sets neither ``IsAlive`` nor ``Label``."""
    return (
        f'{{"nodeId":"{node_id}","host":"{host}","state":"{state}","isAlive":false,'
        f'"score":0,"label":null,"maxCommitTS":{max_commit_ts},"updateTS":{update_ts}}}'
    ).encode()


@dataclass(frozen=True)
class GoStatus:
    node_id: str = ""
    addr: str = ""
    state: str = ""
    is_alive: bool = False
    score: int = 0
    labels: dict[str, str] | None = None
    max_commit_ts: int = 0
    update_ts: int = 0


def go_read_status(raw: bytes) -> GoStatus:
    """``json.Unmarshal`` of a record into ``node.Status`` (ValueError where Go fails)."""
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    out: dict[str, Any] = {}
    for tag, name in (("nodeId", "node_id"), ("host", "addr"), ("state", "state")):
        if (v := _go_field(doc, tag)) is not None:
            if not isinstance(v, str):
                raise ValueError(f"{tag}: cannot unmarshal {v!r} into string")
            out[name] = v
    if (v := _go_field(doc, "isAlive")) is not None:
        out["is_alive"] = _go_bool(v, "isAlive")
    for tag, name in (
        ("score", "score"),
        ("maxCommitTS", "max_commit_ts"),
        ("updateTS", "update_ts"),
    ):
        if (v := _go_field(doc, tag)) is not None:
            out[name] = _go_int64(v, tag)
    if (v := _go_field(doc, "label")) is not None:
        if not isinstance(v, dict):
            raise ValueError(f"label: cannot unmarshal {v!r} into node.Label")
        labels = _go_field(v, "labels")
        out["labels"] = {str(k): str(x) for k, x in (labels or {}).items()}
    return GoStatus(**out)


# -- a pump answering as the Go pump does ---------------------------------------------------


def _key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _key(number, 2) + varint(len(value)) + value


def _int_field(number: int, value: int) -> bytes:
    return _key(number, 0) + varint(value & ((1 << 64) - 1))


def go_binlog_bytes(b: Binlog) -> bytes:
    """gogoproto's marshalling of a tipb ``Binlog``: fields in number order; the non-nullable
    ``tp``, ``start_ts``, ``commit_ts``, ``ddl_job_id`` and ``ddl_schema_state`` always written,
    zero or not; the byte fields when not nil (a nil ``ddl_query`` of a DML is left out)."""
    out = _int_field(1, int(b.tp)) + _int_field(2, b.start_ts) + _int_field(3, b.commit_ts)
    for number, value in ((4, b.prewrite_key), (5, b.prewrite_value), (6, b.ddl_query)):
        if value:
            out += _bytes_field(number, value)
    return out + _int_field(7, b.ddl_job_id) + _int_field(8, b.ddl_schema_state)


def go_pull_reply(payload: bytes, start_ts: int, commit_ts: int) -> bytes:
    """A ``PullBinlogResp`` as the Go pump sends it: ``Entity{Pos{}, payload, Meta}``, the
    non-nullable ``pos`` written empty, no checksum."""
    meta = (_int_field(1, start_ts) if start_ts else b"") + (
        _int_field(2, commit_ts) if commit_ts else b""
    )
    entity = _bytes_field(1, b"") + _bytes_field(2, payload) + _bytes_field(4, meta)
    return _bytes_field(1, entity)


class _Raw:
    """A reply already marshalled: grpclib's codec sends ``SerializeToString()`` as it is."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:
        return self.data

    @classmethod
    def FromString(cls, data: bytes) -> _Raw:
        return cls(data)


@dataclass
class _Stored:
    commit_ts: int
    start_ts: int
    payload: bytes


class GoStylePump:
    """``binlog.Pump`` as tidb-binlog's pump serves it, in memory.

    WriteBinlog keeps prewrites by start ts; a commit becomes a stored commit binlog with its
    prewrite's value and DDL fields copied in (``feedPreWriteValue``), a rollback drops the
    prewrite, an empty payload is a probe. PullBinlogs sends every stored binlog with a commit
    ts above ``startFrom.offset`` in commit-ts order, then, while idle, a fake binlog (start ts
    = commit ts, from ``next_ts``) every ``fake_interval`` seconds, as the Go pump writes one
    when no write came in (3 s there). ``binlogext.PumpBatch`` is UNIMPLEMENTED, as on a Go
    server.
    """

    def __init__(
        self, cluster_id: int, next_ts: Callable[[], Awaitable[int]], fake_interval: float = 0.3
    ) -> None:
        self.cluster_id = cluster_id
        self._next_ts = next_ts
        self._fake_interval = fake_interval
        self._prewrites: dict[int, Binlog] = {}
        self._stored: list[_Stored] = []
        self._changed = asyncio.Condition()
        self.pulls: list[int] = []  # startFrom.offset of every PullBinlogs call
        self.writes = 0
        self.port = 0
        self._server: Server | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def commit_ts(self) -> list[int]:
        """Commit ts of the transactions stored (fake binlogs not included)."""
        return [s.commit_ts for s in self._stored if s.start_ts != s.commit_ts]

    async def start(self) -> int:
        self._server = Server([_PumpHandler(self), PumpBatchBase()])
        await self._server.start("127.0.0.1", 0)
        sockets = self._server._server.sockets  # type: ignore[union-attr]
        self.port = int(sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def write(self, req: WriteBinlogReq) -> WriteBinlogResp:
        if req.cluster_id != self.cluster_id:
            msg = f"cluster ID are mismatch, {req.cluster_id} vs {self.cluster_id}"
            raise GRPCError(Status.UNKNOWN, msg)
        if not req.payload:
            return WriteBinlogResp()  # the pump client's probe
        self.writes += 1
        b = Binlog().parse(req.payload)
        if b.tp == BinlogType.Prewrite:
            self._prewrites[b.start_ts] = b
        elif b.tp == BinlogType.Commit:
            p = self._prewrites.pop(b.start_ts)
            b.prewrite_value, b.ddl_query = p.prewrite_value, p.ddl_query
            b.ddl_job_id, b.ddl_schema_state = p.ddl_job_id, p.ddl_schema_state
            await self._store(_Stored(b.commit_ts, b.start_ts, go_binlog_bytes(b)))
        else:
            self._prewrites.pop(b.start_ts, None)
        return WriteBinlogResp()

    async def _store(self, item: _Stored) -> None:
        async with self._changed:
            self._stored.append(item)
            self._stored.sort(key=lambda s: s.commit_ts)
            self._changed.notify_all()

    async def pull(self, req: PullBinlogReq, stream: Stream[PullBinlogReq, _Raw]) -> None:
        if req.cluster_id != self.cluster_id:
            msg = f"cluster ID are mismatch, {req.cluster_id} vs {self.cluster_id}"
            raise GRPCError(Status.UNKNOWN, msg)
        last = req.start_from.offset
        self.pulls.append(last)
        while True:
            ready = [s for s in self._stored if s.commit_ts > last]
            for s in ready:
                await stream.send_message(_Raw(go_pull_reply(s.payload, s.start_ts, s.commit_ts)))
                last = s.commit_ts
            if ready:
                continue
            try:
                async with self._changed:
                    await asyncio.wait_for(self._changed.wait(), self._fake_interval)
            except TimeoutError:
                ts = await self._next_ts()
                fake = Binlog(tp=BinlogType(BinlogType.Rollback), start_ts=ts, commit_ts=ts)
                await self._store(_Stored(ts, ts, go_binlog_bytes(fake)))


class _PumpHandler:
    def __init__(self, pump: GoStylePump) -> None:
        self.pump = pump

    async def _write(self, stream: Stream[WriteBinlogReq, WriteBinlogResp]) -> None:
        req = await stream.recv_message()
        assert req is not None
        await stream.send_message(await self.pump.write(req))

    async def _pull(self, stream: Stream[PullBinlogReq, _Raw]) -> None:
        req = await stream.recv_message()
        assert req is not None
        await self.pump.pull(req, stream)

    def __mapping__(self) -> dict[str, Handler]:
        return {
            "/binlog.Pump/WriteBinlog": Handler(
                self._write, Cardinality.UNARY_UNARY, WriteBinlogReq, WriteBinlogResp
            ),
            "/binlog.Pump/PullBinlogs": Handler(
                self._pull, Cardinality.UNARY_STREAM, PullBinlogReq, _Raw
            ),
        }
