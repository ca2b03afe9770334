"""The staging format: keyed changes in order, key-changing updates split, DDL and keyless
tables refused, ``range.json`` only once closed, a rerun starts from an empty directory."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tributary.change import Ddl, RowChange, SqlValue, TableInfo, Txn
from tributary.staging import StagingError, StagingWriter, arrow_kind, read_range

T = TableInfo.build(
    "db", "t", [("id", "bigint"), ("v", "varchar(10)"), ("u", "bigint unsigned")], ["id"]
)


def rows(directory: Path) -> list[dict[str, object]]:
    info = read_range(directory)
    (table,) = info.tables
    out: list[dict[str, object]] = []
    for f in sorted((directory / table.directory).glob("*.parquet")):
        out += pq.read_table(f).to_pylist()
    return out


def test_changes_are_keyed_and_ordered(tmp_path: Path) -> None:
    w = StagingWriter(tmp_path / "r", 5, flush_rows=2)
    w.add(Txn(10, 9, rows=(RowChange.insert(T, {"id": 1, "v": "a", "u": (1 << 64) - 1}),)))
    w.add(Txn(11, 10))  # a marker moves the end only
    old: dict[str, SqlValue] = {"id": 1, "v": "a", "u": 0}
    new: dict[str, SqlValue] = {"id": 2, "v": "a", "u": 0}
    w.add(Txn(12, 11, rows=(RowChange.update(T, old, new), RowChange.delete(T, new))))
    with pytest.raises(StagingError):
        read_range(tmp_path / "r")  # not complete before close
    info = w.close(20)
    assert (info.start_ts, info.end_ts, info.rows, info.txns) == (5, 20, 3, 2)
    got = [(r["_commit_ts"], r["_seq"], r["_op"], r["id"], r["u"]) for r in rows(tmp_path / "r")]
    assert got == [
        (10, 0, "U", 1, str((1 << 64) - 1)),
        (12, 1, "D", 1, "0"),
        (12, 2, "U", 2, "0"),
        (12, 3, "D", 2, "0"),
    ]
    assert [c.kind for c in info.tables[0].columns] == ["int", "str", "str"]
    assert info.tables[0].deletes == 2 and read_range(tmp_path / "r") == info


def test_values_arrow_does_not_take_as_they_are_are_converted(tmp_path: Path) -> None:
    """A flush converts a column in one Arrow call, or value by value when that fails."""
    t = TableInfo.build(
        "db",
        "m",
        [("id", "int"), ("f", "double"), ("bits", "bit(12)"), ("d", "decimal(5,2)")],
        ["id"],
    )
    w = StagingWriter(tmp_path / "r", 0)
    values: list[dict[str, SqlValue]] = [
        {"id": 1, "f": Decimal("1.5"), "bits": 0x101, "d": Decimal("2.50")},
        {"id": 2, "f": 2, "bits": b"\x01", "d": "3.10"},
        {"id": 3, "f": None, "bits": None, "d": None},
    ]
    w.add(Txn(10, 9, rows=tuple(RowChange.insert(t, v) for v in values)))
    w.close()
    got = [(r["id"], r["f"], r["bits"], r["d"]) for r in rows(tmp_path / "r")]
    assert got == [
        (1, 1.5, b"\x01\x01", "2.50"),
        (2, 2.0, b"\x01", "3.10"),
        (3, None, None, None),
    ]


def test_refusals(tmp_path: Path) -> None:
    w = StagingWriter(tmp_path / "r", 5)
    with pytest.raises(StagingError, match="DDL"):
        w.add(Txn(10, 9, ddl=Ddl("db", "ALTER TABLE t ADD c INT")))
    keyless = TableInfo.build("db", "k", [("a", "int")])
    with pytest.raises(StagingError, match="primary key"):
        w.add(Txn(11, 10, rows=(RowChange.insert(keyless, {"a": 1}),)))
    with pytest.raises(StagingError, match="does not follow"):
        w.add(Txn(5, 4))
    with pytest.raises(StagingError, match="before the last"):
        w.close(1)


def test_a_rerun_starts_empty(tmp_path: Path) -> None:
    w = StagingWriter(tmp_path / "r", 0)
    w.add(Txn(10, 9, rows=(RowChange.insert(T, {"id": 1, "v": "a", "u": 1}),)))
    w.close()
    StagingWriter(tmp_path / "r", 0)
    assert list((tmp_path / "r").iterdir()) == []


@pytest.mark.parametrize(
    ("mysql_type", "kind"),
    [
        ("int", "int"),
        ("bigint", "int"),
        ("int unsigned", "int"),
        ("bigint unsigned", "str"),
        ("double", "float"),
        ("decimal(10,2)", "str"),
        ("varbinary(16)", "bytes"),
        ("bit(3)", "bytes"),
        ("datetime(3)", "str"),
        ("json", "str"),
    ],
)
def test_arrow_kind(mysql_type: str, kind: str) -> None:
    assert arrow_kind(mysql_type) == kind
