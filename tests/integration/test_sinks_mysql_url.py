"""The MySQL sink's URL and options, and how its sessions are set up, against real MariaDB."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

import pytest

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.mysql.config import MysqlConfig, parse_url
from tributary.sinks.mysql.conn import ConnectParams
from tributary.sinks.mysql.sink import open_url
from tributary.sinks.urls import redact

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]

OPTS = SinkOptions(cluster_id=9, worker_count=5, batch_size=7)


def parse(url: str) -> MysqlConfig:
    return parse_url(urlsplit(url), OPTS)


def test_defaults_come_from_the_sink_options() -> None:
    assert parse("mysql://db.example:3307") == MysqlConfig(
        ConnectParams("db.example", 3307, "root", ""), worker_count=5, batch_size=7
    )
    assert parse("mysql://:pw@[::1]/").connect == ConnectParams("::1", 3306, "root", "pw")


def test_every_option() -> None:
    config = parse(
        "mysql://u%40x:p%40ss%3Aw%2Frd%25@h:1/?consistent=false&worker-count=3&batch-size=50"
        "&time-zone=%2B08:00&checkpoint-schema=cp&checkpoint-table=t&read-timeout=2.5&retries=0"
    )
    assert config == MysqlConfig(
        ConnectParams("h", 1, "u@x", "p@ss:w/rd%", time_zone="+08:00", read_timeout=2.5),
        consistent=False,
        worker_count=3,
        batch_size=50,
        checkpoint_schema="cp",
        checkpoint_table="t",
        retries=0,
    )
    assert "p@ss" not in repr(config)


def test_bad_urls_name_every_problem() -> None:
    with pytest.raises(SinkError) as e:
        parse(
            "mysql://u:secret@h/db?consistent=maybe&worker-count=0&retries=-1&read-timeout=0"
            "&colour=red&retries=3"
        )
    message = str(e.value)
    for part in (
        "consistent='maybe'",
        "worker-count='0'",
        "retries='-1'",
        "read-timeout='0'",
        "unknown option 'colour'",
        "'retries' given twice",
        "database path ('/db')",
    ):
        assert part in message
    assert "secret" not in message and "u:******@h" in message
    assert not e.value.retriable
    with pytest.raises(SinkError, match="bad port"):
        parse("mysql://h:99999/")


def test_redact() -> None:
    assert redact(urlsplit("mysql://u:p@h:1/?a=b")) == "mysql://u:******@h:1/?a=b"
    assert redact(urlsplit("mysql://h:1/")) == "mysql://h:1/"


async def test_a_percent_encoded_password_logs_in(mariadb: MariaDBDatabase) -> None:
    user, password = f"{mariadb.name}@odd", "p@ss:w/rd%?&#"
    await mariadb.server.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
    try:
        await mariadb.server.execute(f"GRANT ALL ON *.* TO '{user}'@'%'")
        url = (
            f"mysql://{quote(user, safe='')}:{quote(password, safe='')}@{mariadb.host}:"
            f"{mariadb.port}/?checkpoint-schema={mariadb.name}"
        )
        async with await open_url(urlsplit(url), OPTS) as sink:
            await sink.apply([Txn(5)])
            assert await sink.checkpoint() == 5
    finally:
        await mariadb.server.execute("DROP USER %s@'%%'", (user,))


async def test_opening_fails_clearly(mariadb: MariaDBDatabase) -> None:
    base = f"{mariadb.host}:{mariadb.port}/?checkpoint-schema={mariadb.name}"
    with pytest.raises(SinkError, match="Access denied") as e:
        await open_url(urlsplit(f"mysql://{mariadb.user}:wrong@{base}"), OPTS)
    assert not e.value.retriable
    good = f"mysql://{mariadb.user}:{mariadb.password}@{base}"
    with pytest.raises(SinkError, match="time zone") as e:
        await open_url(urlsplit(f"{good}&time-zone=Mars/Olympus"), OPTS)
    assert not e.value.retriable


async def test_a_statement_past_the_read_timeout_is_retriable(mariadb: MariaDBDatabase) -> None:
    t = TableInfo.build(mariadb.name, "t", [("id", "int")], ["id"])
    await mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    url = (
        f"mysql://{mariadb.user}:{mariadb.password}@{mariadb.host}:{mariadb.port}/"
        f"?checkpoint-schema={mariadb.name}&read-timeout=0.3&retries=1"
    )
    async with await open_url(urlsplit(url), OPTS) as sink, mariadb.connect() as other:
        async with other.cursor() as cur:  # another client holds the row lock
            await cur.execute("BEGIN")
            await cur.execute("INSERT INTO t VALUES (1)")
            with pytest.raises(SinkError, match="failed 2 times") as e:
                await sink.apply([Txn(10, rows=(RowChange.insert(t, {"id": 1}),))])
            assert e.value.retriable
            await cur.execute("ROLLBACK")
        await asyncio.wait_for(sink.apply([Txn(10, rows=(RowChange.insert(t, {"id": 1}),))]), 30)
        assert await sink.checkpoint() == 10
    assert await mariadb.query("SELECT id FROM t") == [(1,)]


async def test_a_server_without_backslash_escapes_gets_the_values_right(
    mariadb_instance: InstanceFactory,
) -> None:
    server = mariadb_instance("nbe", "--sql-mode=NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES")
    t = TableInfo.build("s", "t", [("id", "int"), ("v", "text"), ("b", "blob")], ["id"])
    value, blob = "back\\slash 'quote' \\' \\\\", b"\\\x00'\\'"
    url = f"mysql://{server.user}:{server.password}@{server.host}:{server.port}/"
    async with await open_url(urlsplit(url), OPTS) as sink:
        await sink.apply(
            [
                Txn(1, ddl=Ddl("s", "CREATE DATABASE s")),
                Txn(2, ddl=Ddl("s", "CREATE TABLE t (id INT PRIMARY KEY, v TEXT, b BLOB)")),
                Txn(3, rows=(RowChange.insert(t, {"id": 1, "v": value, "b": blob}),)),
            ]
        )
    assert await server.query("SELECT v, b FROM s.t") == [(value, blob)]
    [[modes]] = server.admin("SELECT @@GLOBAL.sql_mode")  # the server's mode is untouched
    assert "NO_BACKSLASH_ESCAPES" in modes.split(",")
