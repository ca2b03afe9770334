"""``tributary-check`` (``python -m tributary.checker``): exit codes, text and JSON output, errors.

``main(argv)`` runs in a worker thread (it owns its event loop); stdout/stderr via capsys.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.net import free_port
from tributary.checker.cli import main
from tributary.telemetry.progress import log as progress_log

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]
REPO = Path(__file__).resolve().parents[2]


async def check(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


def make_db(path: Path, rows: Sequence[tuple[Any, ...]], *, with_checkpoint: bool = False) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute('CREATE TABLE "shop__orders" (id INTEGER PRIMARY KEY, note TEXT, pic BLOB)')
        conn.executemany('INSERT INTO "shop__orders" VALUES (?, ?, ?)', rows)
        if with_checkpoint:
            conn.execute('CREATE TABLE "tidb_binlog__checkpoint" (clusterID INTEGER, cp TEXT)')
    conn.close()
    return f"sqlite://{path}"


ROWS = [(i, f"order {i}", bytes([i])) for i in range(1, 11)]


@pytest.fixture
def dbs(tmp_path: Path) -> tuple[str, str, str]:
    """(upstream, equal downstream, differing downstream) SQLite URLs."""
    up = make_db(tmp_path / "up.db", ROWS)
    same = make_db(tmp_path / "same.db", ROWS, with_checkpoint=True)
    changed = [r for r in ROWS if r[0] != 4]
    changed[0] = (1, "order 1", b"\xff")
    other = make_db(tmp_path / "other.db", [*changed, (11, None, None)])
    return up, same, other


async def test_equal_exits_0(dbs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    up, same, _ = dbs
    assert await check("--upstream", up, "--downstream", same, "--chunk-size", "3") == 0
    out = capsys.readouterr().out
    assert "shop.orders: equal (4 chunks, 0 differing; rows 10 upstream, 10 downstream" in out
    assert out.splitlines()[-1] == "EQUAL: 1 tables checked, 0 differing"


async def test_differences_exit_1_with_text(
    dbs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    up, _, other = dbs
    assert await check("-u", up, "-d", other, "--chunk-size", "3") == 1
    lines = capsys.readouterr().out.splitlines()
    assert "  rows: 1 missing, 1 extra, 1 different" in lines
    assert "  different  id=1: pic: '0x01' upstream, '0xff' downstream" in lines
    assert "  missing    id=4 (absent downstream)" in lines
    assert "  extra      id=11 (absent upstream)" in lines


async def test_json_output(dbs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    up, _, other = dbs
    code = await check("-u", up, "-d", other, "--json", "--chunk-size", "4", "--max-diffs", "2")
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["equal"] is False and doc["upstream"] == up
    (t,) = doc["tables"]
    assert {k: t[k] for k in ("table", "chunks", "chunks_differing", "missing", "extra")} == {
        "table": "shop.orders",
        "chunks": 3,
        "chunks_differing": 2,  # id<=4 (1 changed, 4 gone) and id>8 (11 added)
        "missing": 1,
        "extra": 1,
    }
    assert t["different"] == 1 and t["diffs_truncated"] is True
    assert t["diffs"] == [
        {
            "kind": "different",
            "key": {"id": 1},
            "columns": {"pic": {"upstream": "0x01", "downstream": "0xff"}},
        },
        {"kind": "missing", "key": {"id": 4}},
    ]


async def test_progress_on_a_terminal_ends_with_a_final_line(
    dbs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    up, same, _ = dbs
    assert await check("-u", up, "-d", same, "--chunk-size", "3", "--progress", "tty") == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.out
    final = captured.err.split("\r")[-1]
    assert final.startswith("tributary-check: rows 10, tables 1/1, chunks 4, ")
    assert "done in" in final and final.endswith("\x1b[K\n")


@pytest.fixture
def progress_level() -> Iterator[None]:
    level = progress_log.level
    yield
    progress_log.setLevel(level)


@pytest.mark.usefixtures("progress_level")
@pytest.mark.parametrize("argv", [["--log-level", "info"], ["--progress", "log"]])
async def test_progress_without_a_terminal_is_logged(
    dbs: tuple[str, str, str], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    up, _, other = dbs
    assert await check("-u", up, "-d", other, "--chunk-size", "3", *argv) == 1
    err = capsys.readouterr().err
    assert "\r" not in err
    [final] = [line for line in err.splitlines() if "tributary-check: rows" in line]
    assert "[INFO]" in final
    assert "tributary-check: rows 10, tables 1/1, chunks 4, " in final and "done in" in final


async def test_progress_off_shows_nothing(
    dbs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    up, same, _ = dbs
    assert await check("-u", up, "-d", same, "--progress", "off", "-L", "info") == 0
    assert "tributary-check: rows" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["-u", "sqlite:///x.db"],  # no downstream
        ["-u", "sqlite:///x.db", "-d", "sqlite:///y.db", "--chunk-size", "0"],
        ["-u", "sqlite:///x.db", "-d", "sqlite:///y.db", "--bogus"],
    ],
)
async def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert await check(*argv) == 2
    err = capsys.readouterr().err
    assert "tributary-check" in err


async def test_bad_url_and_unreachable_databases_exit_2(
    dbs: tuple[str, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    up, same, _ = dbs
    assert await check("-u", up, "-d", "postgres://h/db") == 2
    assert "use mysql:// or sqlite://" in capsys.readouterr().err
    assert await check("-u", up, "-d", f"sqlite://{tmp_path / 'missing.db'}") == 2
    assert "no SQLite file" in capsys.readouterr().err
    closed = f"mysql://u:secret-pw@127.0.0.1:{free_port()}/db"
    assert await check("-u", closed, "-d", same) == 2
    err = capsys.readouterr().err
    assert "cannot connect" in err and "secret-pw" not in err
    assert await check("-u", up, "-d", same, "--tables", "~(") == 2
    assert "bad table pattern" in capsys.readouterr().err


async def test_wrong_password_or_database_exits_2(
    mariadb: MariaDBDatabase, dbs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"mysql://{mariadb.user}:wrong@{mariadb.host}:{mariadb.port}/{mariadb.name}"
    assert await check("-u", url, "-d", dbs[1]) == 2
    assert "cannot connect" in capsys.readouterr().err
    # A misspelt database must not compare nothing and call it equal.
    assert await check("-u", mariadb.dsn() + "_typo", "-d", dbs[1]) == 2
    assert f"no database '{mariadb.name}_typo'" in capsys.readouterr().err


async def test_python_dash_m_against_mariadb(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    await mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, note TEXT, pic BLOB)")
    async with mariadb.connect(binary_prefix=True) as conn, conn.cursor() as cur:
        await cur.executemany("INSERT INTO orders VALUES (%s, %s, %s)", ROWS)
    down = tmp_path / "down.db"
    with sqlite3.connect(down) as conn:
        table = f"{mariadb.name}__orders"
        conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, note TEXT, pic BLOB)')
        conn.executemany(f'INSERT INTO "{table}" VALUES (?, ?, ?)', ROWS[:-1])
    conn.close()
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tributary.checker", "-u", mariadb.dsn(), "-d", f"sqlite://{down}"),
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, err.decode()
    doc = json.loads(out)
    assert doc["tables"][0]["diffs"] == [{"kind": "missing", "key": {"id": 10}}]
    assert mariadb.password not in out.decode()
