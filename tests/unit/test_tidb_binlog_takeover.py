"""What a take-over from tidb-binlog reads and leaves behind, byte for byte: the drainer's MySQL
checkpoint row and its ``savepoint`` file as tidb-binlog's drainer writes them, the pump records
a Go pump keeps in etcd, and ours read back the way the Go programs decode them
(``tests/support/tidb_binlog_go.py`` has the formats and the Go decoding rules); the MySQL URL
made of ``[syncer.to.checkpoint]`` and what of it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.drainer.checkpoint import FileCheckpoint, parse_savepoint, render_savepoint
from tests.support.tidb_binlog_go import (
    GoCheckpoint,
    GoStatus,
    go_checkpoint_json,
    go_checkpoint_statements,
    go_read_checkpoint,
    go_read_savepoint,
    go_read_status,
    go_savepoint,
    go_status_json,
)
from tributary.config.drainer import DrainerConfig
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus, node_key
from tributary.settings import SettingsError
from tributary.settings.loader import from_toml
from tributary.sinks.checkpoint import (
    CheckpointRecord,
    checkpoint_load,
    checkpoint_save,
    checkpoint_setup,
)
from tributary.sql import MYSQL

TS = 449_812_345_678_901_250  # a TSO timestamp of 2024
CLUSTER = 7_352_046_573_212_345_678  # PD cluster IDs use all 64 bits


# -- the MySQL checkpoint row -------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "commit_ts", "consistent", "version", "ts_map"),
    [
        # a clean stop (consistent), a MySQL downstream: ts-map stays empty
        (go_checkpoint_json(TS, 52), TS, True, 52, {}),
        # a crash or a running drainer (saved every 3 s with consistent false)
        (go_checkpoint_json(TS, 52, consistent=False), TS, False, 52, {}),
        # a TiDB downstream: the applied ts pair
        (
            go_checkpoint_json(TS, 7, ts_map={"primary-ts": TS, "secondary-ts": TS + 9}),
            TS,
            True,
            7,
            {"primary-ts": TS, "secondary-ts": TS + 9},
        ),
        # versions before the rename of the pair
        (
            '{"consistent":false,"commitTS":5,"ts-map":{"master-ts":5,"slave-ts":6}}',
            5,
            False,
            0,
            {"master-ts": 5, "slave-ts": 6},
        ),
    ],
)
def test_the_row_tidb_binlogs_drainer_writes_is_read(
    row: str, commit_ts: int, consistent: bool, version: int, ts_map: dict[str, int]
) -> None:
    record = CheckpointRecord.from_json(row)
    assert (record.commit_ts, record.consistent) == (commit_ts, consistent)
    assert (record.schema_version, record.ts_map) == (version, ts_map)


def test_the_exact_json_of_go_marshal() -> None:
    # the field order and spelling json.Marshal gives MysqlCheckPoint's tags
    assert go_checkpoint_json(TS, 52, consistent=False) == (
        f'{{"consistent":false,"commitTS":{TS},"ts-map":{{}},"schema-version":52}}'
    )


@pytest.mark.parametrize("consistent", [True, False])
def test_our_row_is_read_by_tidb_binlogs_drainer(consistent: bool) -> None:
    ours = CheckpointRecord(TS, consistent=consistent, schema_version=52).to_json()
    assert go_read_checkpoint(ours) == GoCheckpoint(consistent, TS, {}, 52)
    # byte for byte what tidb-binlog's drainer writes for the same state
    assert ours == go_checkpoint_json(TS, 52, consistent=consistent)
    pair = {"primary-ts": TS, "secondary-ts": TS + 1}
    with_map = CheckpointRecord(TS, True, 3, pair).to_json()
    assert go_read_checkpoint(with_map) == GoCheckpoint(True, TS, pair, 3)


def test_our_table_and_statements_are_tidb_binlogs() -> None:
    def plain(sql: str) -> str:
        return " ".join(sql.replace("`", "").lower().split())

    ours = [plain(s) for s in checkpoint_setup(MYSQL)]
    assert ours == [plain(s) for s in go_checkpoint_statements()]
    custom = [plain(s) for s in checkpoint_setup(MYSQL, "binlog_meta", "cp")]
    assert custom == [plain(s) for s in go_checkpoint_statements("binlog_meta", "cp")]
    # one row per upstream cluster, its full uint64 id, as replace into ... values(id, json)
    save = checkpoint_save(MYSQL, CLUSTER, "{}")
    assert plain(save.sql).startswith("replace into tidb_binlog.checkpoint values")
    assert save.args == (CLUSTER, "{}")
    load = checkpoint_load(MYSQL, CLUSTER)
    assert plain(load.sql).startswith("select checkpoint from tidb_binlog.checkpoint where")
    assert load.args == (CLUSTER,)


def test_go_decoding_rules_refuse_what_go_refuses() -> None:
    # the decoder the rollback tests trust must fail where encoding/json fails
    with pytest.raises(ValueError, match="int64"):
        go_read_checkpoint('{"commitTS":"5"}')
    with pytest.raises(ValueError, match="bool"):
        go_read_checkpoint('{"consistent":1}')
    assert go_read_checkpoint('{"CommitTs":5,"other":1}') == GoCheckpoint(commit_ts=5)


# -- the savepoint file -------------------------------------------------------------------


async def test_tidb_binlogs_savepoint_file_is_read(tmp_path: Path) -> None:
    text = go_savepoint(TS, 52, consistent=False)
    assert text == f"consistent = false\ncommitTS = {TS}\nschema-version = 52\n"
    assert parse_savepoint(text) == (TS, False)
    (tmp_path / "savepoint").write_text(text)
    store = FileCheckpoint(tmp_path)
    assert await store.load() == TS
    assert store.consistent is False


@pytest.mark.parametrize("consistent", [True, False])
def test_our_savepoint_is_read_by_tidb_binlogs_drainer(consistent: bool) -> None:
    # FileCheckPoint has no schema version from us: 0, with which tidb-binlog's drainer applies
    # the history's jobs as the binlogs after the checkpoint need them
    assert go_read_savepoint(render_savepoint(TS, consistent)) == GoCheckpoint(consistent, TS)


# -- pump and drainer records -------------------------------------------------------------


GO_PUMP = go_status_json("pump-0:8250", "pump-0.pump:8250", "online", TS, TS + 5)


def test_a_go_pumps_record_is_read() -> None:
    assert GO_PUMP == (
        b'{"nodeId":"pump-0:8250","host":"pump-0.pump:8250","state":"online","isAlive":false,'
        b'"score":0,"label":null,"maxCommitTS":'
        + str(TS).encode()
        + b',"updateTS":'
        + str(TS + 5).encode()
        + b"}"
    )
    status = NodeStatus.from_json(GO_PUMP)
    assert status == NodeStatus(
        "pump-0:8250",
        "pump-0.pump:8250",
        NodeState.ONLINE,
        is_alive=False,
        max_commit_ts=TS,
        update_ts=TS + 5,
    )
    assert status.labels is None
    # every state tidb-binlog writes; labels when set; a record from before maxCommitTS
    for state in NodeState:
        raw = go_status_json("p", "h:1", state.value, 1, 2)
        assert NodeStatus.from_json(raw).state is state
    labelled = GO_PUMP.replace(b'"label":null', b'"label":{"labels":{"zone":"a"}}')
    assert NodeStatus.from_json(labelled).labels == {"zone": "a"}
    old = b'{"nodeId":"p","host":"h:1","state":"paused","isAlive":true,"score":0,"label":null,'
    old += b'"updateTS":3}'
    assert NodeStatus.from_json(old).max_commit_ts == 0


def test_our_record_is_read_by_tidb_binlog() -> None:
    ours = NodeStatus("d-0", "d-0.d:8249", NodeState.PAUSED, max_commit_ts=TS, update_ts=9)
    assert go_read_status(ours.to_json()) == GoStatus(
        "d-0", "d-0.d:8249", "paused", True, 0, None, TS, 9
    )


async def test_the_registry_lists_go_records_and_keeps_them_when_repairing() -> None:
    kv = MemoryKv()
    registry = NodeRegistry(kv)
    await kv.put(node_key(NodeKind.PUMP, "pump-0:8250"), GO_PUMP)
    offline = go_status_json("pump-1:8250", "pump-1.pump:8250", "offline", 3, 4)
    await kv.put(node_key(NodeKind.PUMP, "pump-1:8250"), offline)
    listed = await registry.list(NodeKind.PUMP, include_offline=False)
    assert [(s.node_id, s.addr, s.state) for s in listed] == [
        ("pump-0:8250", "pump-0.pump:8250", NodeState.ONLINE)
    ]
    # binlogctl's update-pump rewrites a record; a Go pump and TiDB's pump client read it
    await registry.set_state(NodeKind.PUMP, "pump-0:8250", NodeState.PAUSED)
    rewritten = await kv.get(node_key(NodeKind.PUMP, "pump-0:8250"))
    assert rewritten is not None
    assert go_read_status(rewritten.value) == GoStatus(
        "pump-0:8250", "pump-0.pump:8250", "paused", False, 0, None, TS, TS + 5
    )


# -- [syncer.to.checkpoint] -----------------------------------------------------------------

BASE = (
    '[syncer]\ndb-type = "mysql"\n[syncer.to]\nhost = "10.0.0.5"\nport = 3306\n'
    'user = "binlog"\n[syncer.to.checkpoint]\n'
)


def url_of(checkpoint: str, base: str = BASE) -> str:
    cfg = from_toml(DrainerConfig, (base + checkpoint).encode())
    return cfg.syncer.sink_url("/data")


def test_checkpoint_schema_and_table_reach_the_mysql_sink() -> None:
    plain = "mysql://binlog@10.0.0.5:3306/?consistent=true"
    assert url_of("") == plain
    assert url_of('schema = "binlog_meta"\n') == plain + "&checkpoint-schema=binlog_meta"
    # tidb-binlog uses table only with a type, and that type's server is the downstream here
    assert url_of('table = "cp"\n') == plain
    same = 'type = "mysql"\nhost = "10.0.0.5"\nschema = "m"\ntable = "cp"\nuser = "x"\n'
    assert url_of(same) == plain + "&checkpoint-schema=m&checkpoint-table=cp"
    local = BASE.replace("10.0.0.5", "127.0.0.1")
    assert url_of('type = "tidb"\n', local).endswith("?consistent=true")


@pytest.mark.parametrize(
    ("checkpoint", "base", "key", "says"),
    [
        ('type = "mysql"\n', BASE, "syncer.to.checkpoint.host", "127.0.0.1:3306 is not in"),
        (
            'type = "mysql"\nhost = "10.0.0.5"\nport = 4000\n',
            BASE,
            "syncer.to.checkpoint.host",
            "not in the downstream",
        ),
        ('type = "oracle"\n', BASE, "syncer.to.checkpoint.type", "Oracle"),
        (
            'type = "mysql"\n',
            BASE.replace('"mysql"', '"kafka"', 1),
            "syncer.to.checkpoint.type",
            "savepoint",
        ),
        (
            'schema = "m"\n',
            BASE.replace("[syncer.to]", 'sink-uri = "mysql://r@h:1/"\n[syncer.to]'),
            "syncer.to.checkpoint",
            "checkpoint-schema=",
        ),
        (
            '[syncer.to.checkpoint.security]\nssl-ca = "ca.pem"\n',
            BASE,
            "syncer.to.checkpoint.security",
            "TLS",
        ),
    ],
)
def test_a_checkpoint_kept_elsewhere_is_refused(
    checkpoint: str, base: str, key: str, says: str
) -> None:
    with pytest.raises(SettingsError) as e:
        url_of(checkpoint, base)
    text = str(e.value)
    assert key in text and says in text, text
