"""The MariaDB fixtures start real servers: ROW binlog, a password user, fresh databases,
restarts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncmy
import asyncmy.errors
import pytest

if TYPE_CHECKING:  # the plugin is imported by pytest itself, so that it is assert-rewritten
    from tests.support.mariadb import InstanceFactory, MariaDBDatabase, MariaDBPair, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]

_seen_databases: list[str] = []


async def test_server_has_row_binlog(mariadb_server: MariaDBServer) -> None:
    rows = await mariadb_server.query("SHOW VARIABLES LIKE 'binlog_format'")
    assert rows == [("binlog_format", "ROW")]
    [(log_bin, server_id, host)] = await mariadb_server.query(
        "SELECT @@log_bin, @@server_id, @@bind_address"
    )
    assert (log_bin, server_id, host) == (1, mariadb_server.server_id, "127.0.0.1")
    assert mariadb_server.admin("SELECT @@collation_server, @@time_zone") == [
        ["utf8mb4_bin", "+00:00"]
    ]


async def test_login_needs_the_password(mariadb_server: MariaDBServer) -> None:
    with pytest.raises(asyncmy.errors.OperationalError):
        await asyncmy.connect(
            host=mariadb_server.host, port=mariadb_server.port, user="tributary", password="wrong"
        )


@pytest.mark.parametrize("run", [1, 2])
async def test_each_test_gets_a_fresh_database(mariadb: MariaDBDatabase, run: int) -> None:
    assert await mariadb.query("SHOW TABLES") == []
    assert mariadb.name not in _seen_databases
    for earlier in _seen_databases:  # dropped when its test ended
        assert mariadb.server.admin(f"SHOW DATABASES LIKE '{earlier}'") == []
    _seen_databases.append(mariadb.name)
    await mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    assert await mariadb.execute("INSERT INTO t VALUES (%s, %s), (%s, %s)", (1, "a", 2, None)) == 2
    assert await mariadb.query("SELECT id, v FROM t ORDER BY id") == [(1, "a"), (2, None)]
    assert mariadb.dsn().endswith(f"@127.0.0.1:{mariadb.port}/{mariadb.name}")


async def test_row_events_reach_the_binlog(mariadb: MariaDBDatabase) -> None:
    [(log_file, position, *_)] = await mariadb.query("SHOW MASTER STATUS")
    await mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    await mariadb.execute("INSERT INTO t VALUES (1)")
    # only this test's events: earlier ones on the shared server may hold binary values that
    # the driver cannot show as text
    events = await mariadb.query(f"SHOW BINLOG EVENTS IN '{log_file}' FROM {int(position)}")
    kinds = [e[2] for e in events]
    assert "Table_map" in kinds and "Write_rows_v1" in kinds


async def test_pair_is_two_independent_servers(mariadb_pair: MariaDBPair) -> None:
    up, down = mariadb_pair.upstream, mariadb_pair.downstream
    assert up.port != down.port and up.server_id != down.server_id
    await up.execute("CREATE DATABASE shop")
    assert [r[0] for r in await up.query("SHOW DATABASES")].count("shop") == 1
    assert "shop" not in [r[0] for r in await down.query("SHOW DATABASES")]
    for server in (up, down):
        assert await server.query("SHOW VARIABLES LIKE 'binlog_format'") == [
            ("binlog_format", "ROW")
        ]


async def test_killed_server_restarts_with_its_committed_data(
    mariadb_instance: InstanceFactory,
) -> None:
    server = mariadb_instance("victim")
    port = server.port
    await server.execute("CREATE DATABASE d")
    await server.execute("CREATE TABLE d.t (id INT PRIMARY KEY)")
    await server.execute("INSERT INTO d.t VALUES (1), (2)")
    server.kill()
    assert not server.running
    with pytest.raises(asyncmy.errors.OperationalError):
        await server.query("SELECT 1")
    server.start()
    assert server.port == port
    assert await server.query("SELECT id FROM d.t ORDER BY id") == [(1,), (2,)]
    server.stop()
    assert not server.running
