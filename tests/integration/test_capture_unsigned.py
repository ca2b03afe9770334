"""Unsigned integers through a real capture into MariaDB: every integer width UNSIGNED (TINYINT
to BIGINT, MEDIUMINT too) at its maximum and just above the signed maximum, next to signed
columns at their extremes, with YEAR columns among them (MariaDB's SIGNEDNESS metadata counts
YEAR as numeric, so a reader counting MySQL's way reads every later column's signedness one bit
off and applies 2^64 - 1 as -1). Inserted, updated and deleted by a BIGINT UNSIGNED key above
2^63; the checker then says the downstream equals the upstream."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.capture import capture_cli, shop_equal, start_capture, wait_for, write_shop

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(180)

TABLE = """CREATE TABLE shop.u (
  id BIGINT UNSIGNED PRIMARY KEY, y YEAR,
  ti TINYINT UNSIGNED, si SMALLINT UNSIGNED, mi MEDIUMINT UNSIGNED, i INT UNSIGNED,
  bi BIGINT UNSIGNED, y2 YEAR, sti TINYINT, ssi SMALLINT, smi MEDIUMINT, si4 INT, sbi BIGINT,
  d DECIMAL(20,0) UNSIGNED, f FLOAT, b BIT(8), y3 YEAR, tail BIGINT UNSIGNED
)"""
COLUMNS = "id, y, ti, si, mi, i, bi, y2, sti, ssi, smi, si4, sbi, d, f, b, y3, tail"
TOP = 2**64 - 1
ROWS = [
    # every unsigned column at its maximum, the signed ones at their minimum
    (TOP, 2155, 255, 65535, 16777215, 4294967295, TOP, 1901, -128, -32768, -8388608,
     -2147483648, -(2**63), TOP, 1.5, 255, 2000, TOP),
    # just above the signed maximum; the signed ones at their maximum
    (2**63, 1999, 128, 32768, 8388608, 2147483648, 2**63, 2024, 127, 32767, 8388607,
     2147483647, 2**63 - 1, 2**63, -1.5, 128, 2001, 2**63),
    (2**63 - 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
]  # fmt: skip


def _values(row: tuple[object, ...]) -> str:
    return "(" + ", ".join(str(v) for v in row) + ")"


async def test_unsigned_integers_of_every_width_replicate_exactly(
    tmp_path: Path, etcd: EtcdProcess, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down")
    capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4310", tmp_path / "c.log")
    try:
        await capture_cli(port, "changefeed", "create", "-c", "cf-u", "--sink-uri", down.dsn())
        await up.execute("CREATE DATABASE shop")
        await up.execute(TABLE)
        await write_shop(up, [f"INSERT INTO u ({COLUMNS}) VALUES {_values(r)}" for r in ROWS])
        await write_shop(up, [f"INSERT INTO u (id) VALUES ({2**63 + 1})"])  # NULLs elsewhere
        await write_shop(
            up,
            [
                f"UPDATE u SET bi = {TOP - 1}, tail = {2**63 + 7}, ti = 200 WHERE id = {2**63}",
                f"UPDATE u SET id = {TOP - 1}, i = 4294967294 WHERE id = {TOP}",
                f"DELETE FROM u WHERE id = {2**63 + 1}",
            ],
        )
        await wait_for(lambda: shop_equal(up, down, 1), 90, "shop.u equal downstream")

        got = await down.query("SELECT id, ti, i, bi, tail FROM shop.u ORDER BY id")
        assert [tuple(r) for r in got] == [
            (2**63 - 1, 0, 0, 0, 0),
            (2**63, 200, 2147483648, TOP - 1, 2**63 + 7),
            (TOP - 1, 255, 4294967294, TOP, TOP),
        ]
    finally:
        capture.terminate()
        capture.wait(timeout=30)
