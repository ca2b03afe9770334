"""The drainer state file: what round-trips, what is refused, and which jobs an export holds."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tributary.ddlhistory import Action, DbInfo, ddl_job, table_info
from tributary.drainerstate import DrainerStateFile, StateFileError, dumps, jobs_at, loads
from tributary.tidbcodec import mysqltypes as mt

DB = DbInfo(2, "bank")
T = table_info(10, "accounts", [("id", mt.ColumnType(mt.TYPE_LONGLONG))], primary_key=["id"])
JOBS = (
    dataclasses.replace(ddl_job(1, Action.CREATE_SCHEMA, 1, DB, None, "CREATE DATABASE bank"),
                        finished_ts=100),
    dataclasses.replace(ddl_job(2, Action.CREATE_TABLE, 2, DB, T, "CREATE TABLE accounts"),
                        finished_ts=200),
    dataclasses.replace(ddl_job(3, Action.TRUNCATE_TABLE, 3, DB, T, "TRUNCATE accounts"),
                        finished_ts=300),
)  # fmt: skip
STATE = DrainerStateFile(
    cluster_id=7312345678901234567,
    commit_ts=449812345678901249,
    source="downstream",
    node_id="demo-drainer-down-0",
    sink="mysql://drainer@10.0.0.5:3306/",
    jobs=JOBS,
    exported_at="2026-01-01T00:00:00Z",
)


def test_round_trip_keeps_every_field() -> None:
    text = dumps(STATE)
    assert loads(text) == STATE
    doc = json.loads(text)
    assert doc["kind"] == "tributary-drainer-state" and doc["version"] == 1
    assert doc["cluster_id"] == 7312345678901234567  # a uint64 stays exact
    assert doc["checkpoint"]["commit_time"] == "2024-05-16T22:18:45.105Z"
    assert doc["schema"]["version"] == 3


def test_jobs_at_keeps_what_finished_by_the_checkpoint() -> None:
    assert [j.id for j in jobs_at(reversed(JOBS), 250)] == [1, 2]
    assert jobs_at(JOBS, 99) == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(kind="other"), "not a drainer state"),
        (lambda d: d.update(version=2), "version 2 is not one this drainer reads"),
        (lambda d: d.pop("cluster_id"), "cluster_id: missing"),
        (lambda d: d["checkpoint"].update(commit_ts="1"), "checkpoint.commit_ts: missing or not"),
        (lambda d: d["checkpoint"].update(source="guess"), "'guess' is not one of"),
        (lambda d: d["checkpoint"].update(commit_ts=250), "jobs [3] finished after"),
        (lambda d: d["schema"]["jobs"].append({"id": "x"}), "schema.jobs"),
    ],
)
def test_bad_files_are_refused_with_what_is_wrong(change: object, message: str) -> None:
    doc = json.loads(dumps(STATE))
    change(doc)  # type: ignore[operator]
    with pytest.raises(StateFileError, match=r"state\.json: ") as e:
        loads(json.dumps(doc), "state.json")
    assert message in str(e.value)


def test_not_json() -> None:
    with pytest.raises(StateFileError, match="not JSON"):
        loads("{", "state.json")
