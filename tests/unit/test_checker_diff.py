"""Row diffs of a chunk and how the report counts, caps and renders them."""

from __future__ import annotations

import json

from tributary.checker.diff import diff_rows
from tributary.checker.report import DiffKind, Presence, Report, RowDiff, TableReport

COLS = ("id", "name", "qty")


def test_keyed_diff_names_key_and_columns() -> None:
    up = [(1, "a", 1), (2, "b", 2), (3, "c", 3), (4, "d", 4)]
    down = [(4, "d", 4), (1, "a", 1), (2, "B", 20), (5, "e", 5)]  # any order
    diffs = list(diff_rows(COLS, (0,), up, down))
    assert diffs == [
        RowDiff(DiffKind.DIFFERENT, (("id", 2),), ("name", "qty"), ("b", 2), ("B", 20)),
        RowDiff(DiffKind.MISSING, (("id", 3),)),
        RowDiff(DiffKind.EXTRA, (("id", 5),)),
    ]


def test_composite_key_and_null_values() -> None:
    up = [(1, "x", None), (1, "y", 0)]
    down = [(1, "x", 0), (1, "y", 0)]
    diffs = list(diff_rows(COLS, (0, 1), up, down))
    assert diffs == [
        RowDiff(DiffKind.DIFFERENT, (("id", 1), ("name", "x")), ("qty",), (None,), (0,))
    ]


def test_duplicate_keys_downstream_are_extra() -> None:
    # A downstream without the key constraint may hold a key twice.
    up = [(1, "a", 1)]
    down = [(1, "a", 1), (1, "a", 1), (1, "z", 1)]
    diffs = list(diff_rows(COLS, (0,), up, down))
    assert [d.kind for d in diffs] == [DiffKind.EXTRA, DiffKind.EXTRA]
    assert all(d.key == (("id", 1),) for d in diffs)


def test_keyless_rows_compare_as_multisets() -> None:
    up = [(1, "a", 1), (1, "a", 1), (1, "a", 1), (2, None, 2)]
    down = [(1, "a", 1), (2, "", 2), (2, None, 2)]
    diffs = list(diff_rows(COLS, (), up, down))
    assert diffs == [
        RowDiff(DiffKind.MISSING, (("id", 1), ("name", "a"), ("qty", 1)), count=2),
        RowDiff(DiffKind.EXTRA, (("id", 2), ("name", ""), ("qty", 2))),
    ]


def test_equal_chunks_have_no_diffs() -> None:
    rows = [(i, str(i), i) for i in range(10)]
    assert list(diff_rows(COLS, (0,), rows, list(reversed(rows)))) == []
    assert list(diff_rows(COLS, (), rows, list(reversed(rows)))) == []


def test_report_counts_everything_but_lists_up_to_the_cap() -> None:
    t = TableReport("db.t", "db.t", key=("id",), key_kind="primary key")
    for i in range(5):
        t.add(RowDiff(DiffKind.MISSING, (("id", i),)), max_diffs=2)
    t.add(RowDiff(DiffKind.EXTRA, (("id", 9),), count=3), max_diffs=2)
    assert (t.missing, t.extra, t.different) == (5, 3, 0)
    assert len(t.diffs) == 2 and not t.equal
    d = t.to_dict()
    assert d["diffs_truncated"] is True and d["missing"] == 5
    assert "... 6 more not listed" in Report("u", "d", [t]).render_text()


def test_report_verdicts_and_json() -> None:
    same = TableReport("db.a", "db.a", key=("id",), key_kind="primary key", chunks=3)
    cols = TableReport("db.b", "db.b", columns_only_downstream=("extra_col",))
    gone = TableReport("db.c", "db.c", presence=Presence.UPSTREAM_ONLY)
    blob = TableReport("db.d", "db.d", key=("k",), key_kind="primary key")
    blob.add(
        RowDiff(DiffKind.DIFFERENT, (("k", b"\x01\xff"),), ("v",), (None,), (b"",)), max_diffs=10
    )
    assert Report("u", "d", [same]).equal
    report = Report("mysql://u@h:1/db", "sqlite:///x.db", [same, cols, gone, blob])
    assert not report.equal
    doc = json.loads(report.to_json())
    assert doc["equal"] is False and doc["tables_differing"] == 3
    assert [t["equal"] for t in doc["tables"]] == [True, False, False, False]
    assert doc["tables"][2]["presence"] == "upstream only"
    assert doc["tables"][3]["diffs"] == [
        {
            "kind": "different",
            "key": {"k": "0x01ff"},
            "columns": {"v": {"upstream": None, "downstream": "0x"}},
        }
    ]
    text = report.render_text()
    assert "db.a: equal (3 chunks" in text
    assert "columns only downstream: extra_col" in text
    assert "db.c: only in the upstream" in text
    assert "different  k='0x01ff': v: NULL upstream, '0x' downstream" in text
    assert text.splitlines()[-1] == "DIFFERENT: 4 tables checked, 3 differing"
