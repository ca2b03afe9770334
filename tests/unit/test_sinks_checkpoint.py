"""The checkpoint JSON is tidb-binlog's: same keys, and old rows without optional keys load."""

from __future__ import annotations

import json

import pytest

from tributary.sinks import SinkError
from tributary.sinks.checkpoint import CheckpointRecord


def test_json_has_tidb_binlog_keys() -> None:
    rec = CheckpointRecord(420, consistent=False, schema_version=7, ts_map={"primary-ts": 1})
    assert json.loads(rec.to_json()) == {
        "consistent": False,
        "commitTS": 420,
        "ts-map": {"primary-ts": 1},
        "schema-version": 7,
    }
    assert CheckpointRecord.from_json(rec.to_json()) == rec


def test_a_go_drainer_row_loads() -> None:
    go = '{"consistent":true,"commitTS":417307011234562049,"ts-map":null}'
    assert CheckpointRecord.from_json(go) == CheckpointRecord(417307011234562049, True, 0, {})


@pytest.mark.parametrize(
    "text",
    ["", "[]", '{"consistent":true}', '{"commitTS":"x"}', '{"commitTS":-1}', '{"commitTS":1.5}'],
)
def test_unreadable_checkpoints_are_sink_errors(text: str) -> None:
    with pytest.raises(SinkError) as e:
        CheckpointRecord.from_json(text)
    assert not e.value.retriable
