"""The drainer's schema tracker: DDL jobs applied by schema version, tables looked up by version.

The jobs and tables are built with ``tests.support.ddl_jobs``.
"""

from __future__ import annotations

import dataclasses

import pytest

from services.drainer.errors import DrainerError
from services.drainer.schema import (
    MYSQL_DB,
    AppliedDdl,
    SchemaError,
    SchemaTracker,
    UnknownTable,
)
from tests.support.ddl_jobs import (
    DB_ID,
    PK_INT,
    T1,
    T1_B,
    VARCHAR,
    alter,
    col,
    create_db,
    create_table,
    index,
    job,
    table,
)
from tributary.ddlhistory import (
    Action,
    DbInfo,
    DdlJob,
    JobState,
    SchemaState,
)


def tracker(*jobs: DdlJob) -> SchemaTracker:
    s = SchemaTracker()
    for j in jobs:
        s.apply(j)
    return s


def test_tables_are_looked_up_by_the_schema_version_they_had() -> None:
    s = tracker(create_db(1, 1), create_table(2, 3, T1))
    assert s.apply(alter(3, 5, T1_B)) == AppliedDdl("shop", "t")
    assert s.version == 5
    assert s.table_at(40, 3).sink.column_names == ("id", "a")
    assert s.table_at(40, 4).sink.column_names == ("id", "a")
    new = s.table_at(40, 9)
    assert new.sink.column_names == ("id", "a", "b")
    assert new.sink.qualified == "shop.t" and new.sink.primary_key == ("id",)
    assert new.sink.column("b").mysql_type == "varchar(20)"
    assert [c.id for c in new.columns.values()] == [1, 2, 3]
    assert new.handle == (new.columns[1],)  # an int primary key is the row handle
    with pytest.raises(UnknownTable, match="did not exist yet at schema version 2"):
        s.table_at(40, 2)
    with pytest.raises(UnknownTable, match="table id 41 is unknown"):
        s.table_at(41, 9)


def test_drop_and_truncate_and_rename() -> None:
    t2 = table(50, "u", [col(1, "id", PK_INT)])
    s = tracker(create_db(1, 1), create_table(2, 2, T1), create_table(3, 3, t2))
    truncated = table(51, "u", [col(1, "id", PK_INT)])
    trunc = job(4, Action.TRUNCATE_TABLE, 4, table_id=50, info=truncated)
    assert s.apply(trunc) == AppliedDdl("shop", "u")
    assert s.is_truncated(50) and not s.is_truncated(51)
    assert s.table_at(51, 4).sink.qualified == "shop.u"
    with pytest.raises(UnknownTable, match="table id 50 was dropped at schema version 4"):
        s.table_at(50, 4)
    assert s.table_at(50, 3).id == 50  # older binlogs still read with the old table

    s.apply(create_db(5, 5, "archive", db_id=3))
    renamed = table(40, "t_old", T1.columns)
    assert s.apply(job(6, Action.RENAME_TABLE, 6, schema_id=3, info=renamed)) == AppliedDdl(
        "archive", "t_old"
    )
    assert s.table_at(40, 6).sink.qualified == "archive.t_old"
    assert s.table_at(40, 5).sink.qualified == "shop.t"
    assert s.apply(job(7, Action.DROP_TABLE, 7, schema_id=3, table_id=40)) == AppliedDdl(
        "archive", "t_old"
    )
    with pytest.raises(UnknownTable, match="dropped"):
        s.table_at(40, 7)

    assert s.apply(job(8, Action.DROP_SCHEMA, 8, schema_id=DB_ID)) == AppliedDdl("shop")
    with pytest.raises(UnknownTable, match="dropped at schema version 8"):
        s.table_at(51, 8)
    assert s.database(DB_ID) is None and s.database(3) == DbInfo(3, "archive")


def test_indexes_and_keys_reach_the_sink_table() -> None:
    no_pk = table(60, "k", [col(1, "a"), col(2, "b"), col(3, "c")], pk_is_handle=False)
    s = tracker(create_db(1, 1), create_table(2, 2, no_pk))
    assert s.table_at(60, 2).sink.primary_key == () and s.table_at(60, 2).handle == (None,)
    with_uk = table(
        60, "k", no_pk.columns, pk_is_handle=False, indices=[index(1, "uk", ["b", "c"])]
    )
    s.apply(alter(3, 3, with_uk, Action.ADD_INDEX))
    sink = s.table_at(60, 3).sink
    assert [(u.name, u.columns) for u in sink.unique_keys] == [("uk", ("b", "c"))]
    pk = index(2, "PRIMARY", ["a"], primary=True)
    s.apply(
        alter(
            4,
            4,
            table(60, "k", no_pk.columns, pk_is_handle=False, indices=[pk]),
            Action.ADD_PRIMARY_KEY,
        )
    )
    assert s.table_at(60, 4).sink.primary_key == ("a",) and s.table_at(60, 4).sink.unique_keys == ()


def test_clustered_primary_key_and_hidden_columns() -> None:
    cols = [
        col(1, "k", VARCHAR),
        col(2, "n"),
        col(3, "g", generated_expr="`n` + 1"),
        col(4, "w", state=SchemaState.WRITE_ONLY),
    ]
    pk = index(1, "PRIMARY", ["k", "n"], primary=True)
    clustered = table(70, "c", cols, pk_is_handle=False, indices=[pk], common=True)
    t = tracker(create_db(1, 1), create_table(2, 2, clustered)).table_at(70, 2)
    assert t.sink.column_names == ("k", "n")  # no generated, no write-only column
    assert t.sink.primary_key == ("k", "n")
    assert [c.name if c else None for c in t.handle] == ["k", "n"]


def test_rows_of_an_older_version_take_the_names_the_table_has_now() -> None:
    # a clustered key (k, n) whose column n is renamed, a column dropped and one added, the
    # table renamed: rows of the old version are read as the table is now, by column id
    pk = index(1, "PRIMARY", ["k", "n"], primary=True)
    cols = [col(1, "k", VARCHAR), col(2, "n"), col(3, "x"), col(4, "y")]
    v2 = table(70, "c", cols, pk_is_handle=False, indices=[pk], common=True)
    s = tracker(create_db(1, 1), create_table(2, 2, v2))
    assert s.rows_table(70, 2) is s.table_at(70, 2)  # nothing changed since: the same table
    renamed_pk = index(1, "PRIMARY", ["k", "n2"], primary=True)
    v3_cols = [col(1, "k", VARCHAR), col(2, "n2"), col(4, "y"), col(5, "z")]
    s.apply(alter(3, 3, table(70, "c", v3_cols, pk_is_handle=False, indices=[renamed_pk],
                              common=True), Action.MODIFY_COLUMN))  # fmt: skip
    s.apply(job(4, Action.RENAME_TABLE, 4, schema_id=DB_ID,
                info=table(70, "c2", v3_cols, pk_is_handle=False, indices=[renamed_pk],
                           common=True)))  # fmt: skip
    late = s.rows_table(70, 2)
    assert late.sink.qualified == "shop.c2"
    assert late.sink.column_names == ("k", "n2", "y", "z")  # x is gone downstream
    assert late.sink.primary_key == ("k", "n2")
    assert [c.name if c else None for c in late.handle] == ["k", "n2"]
    assert [c.id for c in late.columns.values()] == [1, 2, 4, 5]
    # z is read when a row holds it (TiDB wrote it with a later version than its binlog
    # says); a row without it is written without it
    assert late.partial
    narrow = late.narrowed({"k", "n2", "y"})
    assert narrow.column_names == ("k", "n2", "y") and narrow.primary_key == ("k", "n2")
    assert s.rows_table(70, 2) is late and s.table_at(70, 2).sink.qualified == "shop.c"
    assert s.rows_table(70, 4) is s.table_at(70, 4)


def test_jobs_that_change_nothing_and_jobs_that_did_not_happen() -> None:
    s = tracker(create_db(1, 1), create_table(2, 2, T1))
    cancelled = alter(3, 3, T1_B)
    cancelled = dataclasses.replace(cancelled, state=JobState.ROLLBACK_DONE)
    assert s.apply(cancelled) is None and s.version == 2 and not s.is_applied(3)
    lock = job(4, Action.LOCK_TABLE, 3, table_id=40)
    assert s.apply(lock) is None and s.version == 3 and s.is_applied(4)
    assert s.table_at(40, 3).sink.column_names == ("id", "a")


def test_applying_twice_is_a_no_op_and_out_of_order_is_an_error() -> None:
    create = create_table(2, 2, T1)
    s = tracker(create_db(1, 1), create, alter(3, 4, T1_B))
    assert s.apply(create) == AppliedDdl("shop", "t")  # the earlier result, nothing changes
    assert s.table_at(40, 9).sink.column_names == ("id", "a", "b")
    late = alter(9, 3, T1)
    with pytest.raises(SchemaError, match=r"job 9 \(schema version 3\) arrived after .* version 4"):
        s.apply(late)


def test_a_job_that_does_not_fit_leaves_the_schema_untouched() -> None:
    s = tracker(create_db(1, 1), create_table(2, 2, T1))
    with pytest.raises(SchemaError, match="already exists"):
        s.apply(create_table(3, 3, T1))
    with pytest.raises(SchemaError, match="database id 9 is unknown"):
        s.apply(create_table(4, 4, table(41, "x", [col(1, "id", PK_INT)]), db_id=9))
    with pytest.raises(SchemaError, match="carries no table info"):
        s.apply(job(5, Action.ADD_COLUMN, 5, table_id=40))
    bad_key = table(40, "t", T1.columns, indices=[index(1, "uk", ["missing"])])
    s.apply(alter(6, 6, bad_key, Action.ADD_INDEX))  # an index over unknown columns is ignored
    assert s.table_at(40, 6).sink.unique_keys == ()
    with pytest.raises(SchemaError, match="does not exist"):
        s.apply(job(7, Action.DROP_TABLE, 7, table_id=99))
    assert s.version == 6 and s.table_at(40, 9).sink.column_names == ("id", "a")
    assert isinstance(SchemaError("x"), DrainerError) and not SchemaError("x").retriable


def test_create_tables_in_one_job() -> None:
    s = tracker(create_db(1, 1))
    batch = job(2, Action.CREATE_TABLES, 2, table_id=0)
    batch = dataclasses.replace(batch, multiple_table_infos=(T1, table(41, "v", T1.columns)))
    assert s.apply(batch) == AppliedDdl("shop", "v")
    assert s.table_at(41, 2).sink.qualified == "shop.v" and s.table_at(40, 2).id == 40


def test_the_mysql_database_is_there_before_any_job() -> None:
    # TiDB 6.2+ creates `mysql` (id 1) in its store: its history has the tables, never the
    # database. tidb-binlog's drainer seeds it; so do we.
    user = table(5, "user", [col(1, "Host", VARCHAR), col(2, "User", VARCHAR)], pk_is_handle=False)
    bind = table(7, "bind_info", [col(1, "sql", VARCHAR)], pk_is_handle=False)
    s = tracker(create_table(3, 1, user, db_id=1), create_table(6, 2, bind, db_id=1))
    assert s.database(1) == MYSQL_DB == DbInfo(1, "mysql", "utf8mb4", "utf8mb4_bin")
    assert s.table_at(5, 1).sink.qualified == "mysql.user"
    s.apply(create_db(80, 3))  # the user's databases come later, with jobs
    s.apply(create_table(81, 4, T1))
    assert s.table_at(40, 4).sink.qualified == "shop.t"
    assert s.apply(job(82, Action.DROP_TABLE, 5, schema_id=1, table_id=7)) == AppliedDdl(
        "mysql", "bind_info"
    )
    # A job creating database 1 replaces the seed (as tidb-binlog's does); its tables stay.
    s.apply(create_db(83, 6, "mysql", db_id=1))
    assert s.database(1) == DbInfo(1, "mysql") and s.table_at(5, 6).sink.qualified == "mysql.user"
    with pytest.raises(SchemaError, match=r"database id 1 \(mysql\) already exists"):
        s.apply(create_db(84, 7, "mysql", db_id=1))


def test_a_history_that_creates_database_1_replaces_the_seed() -> None:
    # Older TiDB creates `mysql` with a job, and our writers' first database may take id 1.
    s = tracker(create_db(1, 1, "shop", db_id=1), create_table(2, 2, T1, db_id=1))
    assert s.database(1) == DbInfo(1, "shop")
    assert s.table_at(40, 2).sink.qualified == "shop.t"
    with pytest.raises(SchemaError, match=r"database id 1 \(again\) already exists"):
        s.apply(create_db(3, 3, "again", db_id=1))  # replaced once, then a real database
    assert s.version == 2 and s.database(1) == DbInfo(1, "shop")
    assert s.apply(job(4, Action.DROP_SCHEMA, 4, schema_id=1)) == AppliedDdl("shop")
    assert s.database(1) is None
    s.apply(create_db(5, 5, "mysql", db_id=1))
    assert s.database(1) == DbInfo(1, "mysql")
