"""TiCDC's changefeed config against a real capture, etcd and MariaDB at both ends: event
filters drop the event types, DDL and row values they name (and nothing else), a small
``memory-quota`` still lets everything through, and what cannot be honoured is refused by the
CLI with the reason."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.capture import ROOT, capture_cli, start_capture, write_shop
from tests.support.etcd import EtcdProcess

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(240)

CONFIG = """
memory-quota = 2048
[filter]
rules = ['shop.*']
[[filter.event-filters]]
matcher = ['shop.orders']
ignore-event = ['delete']
ignore-insert-value-expr = "price > 1000"
ignore-update-new-value-expr = "state = 'void'"
[[filter.event-filters]]
matcher = ['shop.*']
ignore-event = ['drop table']
ignore-sql = ['^truncate']
"""


def cli(port: int, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "services.capture", "cli", *args, "--server", f"127.0.0.1:{port}"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )


async def query(db: MariaDBServer, sql: str) -> list[tuple[Any, ...]]:
    try:
        return [tuple(r) for r in await db.query(sql)]
    except Exception:  # the table may not exist downstream yet
        return []


async def test_event_filters_drop_what_they_name_and_bad_configs_are_refused(
    tmp_path: Path, etcd: EtcdProcess, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4302", tmp_path / "c.log")
    try:
        # What cannot be honoured is refused, with the reason, and nothing is created.
        bad = tmp_path / "bad.toml"
        for text, reason in (
            ("[mounter]\nworker-num = 16\n", "config.mounter: rows are decoded"),
            (
                "[[filter.event-filters]]\nmatcher = ['shop.*']\n"
                "ignore-event = ['rebase auto id']\n",
                "TiDB-only events",
            ),
            (
                "[[filter.event-filters]]\nmatcher = ['shop.*']\n"
                "ignore-delete-value-expr = 'lower(name) = 1'\n",
                "function lower() is not supported",
            ),
            ("[consistent]\nlevel = 'eventual'\n", "config.consistent: there is no redo log"),
        ):
            bad.write_text(text)
            await capture_cli(port, "capture", "list")  # the capture answers
            out = cli(port, "changefeed", "create", "-c", "bad", "--sink-uri", down.dsn(),
                      "--config", str(bad))  # fmt: skip
            assert out.returncode == 1, out.stdout
            assert reason in out.stderr.decode(), out.stderr.decode()
        assert b'"total": 0' in cli(port, "changefeed", "list").stdout

        good = tmp_path / "cf.toml"
        good.write_text(CONFIG)
        out = cli(port, "changefeed", "create", "-c", "cf-filter", "--sink-uri", down.dsn(),
                  "--config", str(good))  # fmt: skip
        assert out.returncode == 0, out.stderr.decode()
        assert b'"ignore_insert_value_expr": "price > 1000"' in out.stdout

        await up.execute("CREATE DATABASE shop")
        await up.execute(
            "CREATE TABLE shop.orders (id INT PRIMARY KEY, price DECIMAL(10,2), state VARCHAR(8))"
        )
        await up.execute("CREATE TABLE shop.notes (id INT PRIMARY KEY, body VARCHAR(200))")
        await write_shop(
            up,
            [
                "INSERT INTO orders VALUES (1, 10, 'new'), (2, 5000, 'new'), (3, 20, 'new')",
                "INSERT INTO notes VALUES (0, 'first')",
            ],
        )
        for i in range(1, 21):  # ~4 KiB of notes through a 2 KiB read-ahead quota
            await write_shop(up, [f"INSERT INTO notes VALUES ({i}, '{'n' * 190}')"])
        await write_shop(up, ["DELETE FROM orders WHERE id = 1"])  # ignore-event delete
        await write_shop(up, ["UPDATE orders SET state = 'void' WHERE id = 3"])  # new-value expr
        await up.execute("TRUNCATE TABLE shop.notes")  # ignore-sql
        await up.execute("CREATE TABLE shop.tmp (id INT PRIMARY KEY)")
        await up.execute("DROP TABLE shop.tmp")  # ignore-event drop table
        await write_shop(up, ["INSERT INTO orders VALUES (4, 30, 'last')"])

        async with asyncio.timeout(90):
            while True:
                if (4,) in await query(down, "SELECT id FROM shop.orders"):
                    break
                await asyncio.sleep(0.3)

        orders = await query(down, "SELECT id, price, state FROM shop.orders ORDER BY id")
        assert [(i, int(p), s) for i, p, s in orders] == [
            (1, 10, "new"),  # its delete was dropped
            (3, 20, "new"),  # the update to 'void' was dropped
            (4, 30, "last"),
        ]  # 2 (price 5000) was never inserted
        assert (await query(down, "SELECT COUNT(*) FROM shop.notes")) == [(21,)]  # no truncate
        assert (await query(down, "SELECT COUNT(*) FROM shop.tmp")) == [(0,)]  # not dropped
        upstream = await query(up, "SELECT id FROM shop.orders ORDER BY id")
        assert upstream == [(2,), (3,), (4,)]
    finally:
        capture.terminate()
        capture.wait(timeout=30)
