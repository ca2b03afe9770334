"""The lake manifest's rules: completeness is the contiguous chain from the first range; a
range starting at S supersedes the recorded ranges starting at or after S."""

from __future__ import annotations

from pathlib import Path

from services.spark.lake_manifest import LakeFile, LakeRange, Manifest
from services.spark.mysql_target import merge_statements
from tributary.staging.format import StagedColumn, StagedTable


def rng(start: int, end: int) -> LakeRange:
    return LakeRange(
        start, end, (LakeFile(f"t/d/part-{start}-{end}.parquet", "t", "d", 1, start + 1, end),)
    )


def test_complete_ts_follows_the_contiguous_chain() -> None:
    m = Manifest()
    assert m.complete_ts is None
    m, gone = m.add(rng(0, 10))
    m, _ = m.add(rng(10, 25))
    m, _ = m.add(rng(30, 40))
    assert m.complete_ts == 25 and gone == []  # a gap between 25 and 30
    m, gone = m.add(rng(25, 30))  # starts before (30,40]'s start: that one is superseded
    assert m.complete_ts == 30 and [f.path for f in gone] == ["t/d/part-30-40.parquet"]


def test_a_range_supersedes_later_starts_and_round_trips() -> None:
    m = Manifest()
    for s, e in ((0, 10), (10, 25), (25, 30), (30, 40)):
        m, _ = m.add(rng(s, e))
    m, gone = m.add(rng(10, 28))
    assert [(r.start_ts, r.end_ts) for r in m.ranges] == [(0, 10), (10, 28)]
    assert sorted(f.path for f in gone) == [
        "t/d/part-10-25.parquet",
        "t/d/part-25-30.parquet",
        "t/d/part-30-40.parquet",
    ]
    assert m.complete_ts == 28
    assert Manifest.from_json(m.to_json()) == m


def test_merge_statements_delete_then_load() -> None:
    t = StagedTable(
        "db",
        "t",
        (
            StagedColumn("a", "int", "int"),
            StagedColumn("b", "varchar(4)", "str"),
            StagedColumn("v", "blob", "bytes"),
        ),
        ("a", "b"),
        "tables/db.t",
    )
    parts = [Path("/w/part-0.csv"), Path("/w/it's.csv")]
    stmts = merge_statements(t, parts, deletes=True)
    assert stmts[0] == "USE `db`"
    assert stmts[1].startswith("DELETE t FROM `db`.`t` AS t JOIN `db`.`_tributary_cu_")
    assert "ON t.`a` = d.`a` AND t.`b` = d.`b`" in stmts[1]
    assert stmts[2].startswith(
        "LOAD DATA LOCAL INFILE '/w/part-0.csv' REPLACE INTO TABLE `db`.`t` CHARACTER SET utf8mb4"
    )
    assert stmts[2].endswith("(`a`, @c1, @c2) SET `b` = SUBSTRING(@c1, 2), `v` = UNHEX(@c2)")
    assert stmts[3].startswith("LOAD DATA LOCAL INFILE '/w/it\\'s.csv' REPLACE")
    assert len(merge_statements(t, parts[:1], deletes=False)) == 2
