"""reparo end to end: the file sink writes a few hundred transactions (with DDL) into a directory,
reparo replays them into SQLite, and the tables hold exactly the expected rows; commit-ts and
datetime ranges, table filters, re-runs, segment skipping, the print destination, exit codes.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from services.reparo.cli import main
from services.reparo.config import ReparoConfig
from services.reparo.reader import ReadProgress, read_txns
from tributary.change import Ddl, RowChange, SqlValue, TableInfo, Txn
from tributary.settings import load
from tributary.sinks.file.binlogfile import list_segments
from tributary.sinks.file.sink import FileSink
from tributary.wire import ts as tso

ROOT = Path(__file__).resolve().parents[2]
BASE_MS = 1_700_000_000_000
ACCT = TableInfo.build("shop", "acct", [("id", "int"), ("bal", "int"), ("name", "varchar(20)")])
ACCT2 = TableInfo.build(
    "shop", "acct", [*((c.name, c.mysql_type) for c in ACCT.columns), ("note", "varchar(20)")]
)
LOG = TableInfo.build("other", "log", [("id", "int"), ("msg", "text")])
Rows = dict[int, dict[str, SqlValue]]


def commit_ts(i: int) -> int:
    return tso.compose(BASE_MS + i * 1000, i % 7)  # one transaction a second


@dataclass
class History:
    txns: list[Txn] = field(default_factory=list)
    states: list[tuple[int, Rows, Rows]] = field(default_factory=list)  # (ts, acct, log) after


def make_history(n: int = 300) -> History:
    """DDL first, then ``n`` random transactions; ADD COLUMN half way. Keeps the model."""
    rnd = random.Random(7)
    h = History()
    acct: Rows = {}
    log: Rows = {}
    ddl = [
        Ddl("shop", "CREATE DATABASE shop"),
        Ddl("shop", "CREATE TABLE acct (id INT PRIMARY KEY, bal INT, name VARCHAR(20))", "acct"),
        Ddl("other", "CREATE DATABASE other"),
        Ddl("other", "CREATE TABLE log (id INT PRIMARY KEY, msg TEXT)", "log"),
    ]
    i = 0
    for d in ddl:
        i += 1
        h.txns.append(Txn(commit_ts(i), ddl=d))
        h.states.append((commit_ts(i), dict(acct), dict(log)))
    table = ACCT
    for n_txn in range(n):
        i += 1
        if n_txn == n // 2:
            alter = Ddl("shop", "ALTER TABLE acct ADD COLUMN note VARCHAR(20)", "acct")
            h.txns.append(Txn(commit_ts(i), ddl=alter))
            acct = {k: {**v, "note": None} for k, v in acct.items()}
            table = ACCT2
            h.states.append((commit_ts(i), dict(acct), dict(log)))
            i += 1
        rows: list[RowChange] = []
        for _ in range(rnd.randint(1, 4)):
            rows.append(_change(rnd, table, acct))
        if rnd.random() < 0.3:
            lid = len(log) + 1
            log[lid] = {"id": lid, "msg": f"event {i}"}
            rows.append(RowChange.insert(LOG, log[lid]))
        h.txns.append(Txn(commit_ts(i), commit_ts(i) - 1, tuple(rows)))
        h.states.append((commit_ts(i), dict(acct), dict(log)))
    return h


def _change(rnd: random.Random, table: TableInfo, acct: Rows) -> RowChange:
    choice = rnd.random()
    if acct and choice < 0.15:
        key = rnd.choice(sorted(acct))
        old = acct.pop(key)
        return RowChange.delete(table, old)
    if acct and choice < 0.5:
        key = rnd.choice(sorted(acct))
        old = acct[key]
        new = {**old, "bal": rnd.randint(0, 1000), "name": rnd.choice(["ann", "bob", None])}
        if table is ACCT2:
            new["note"] = rnd.choice(["hi", None])
        acct[key] = new
        return RowChange.update(table, old, new)
    key = max(acct, default=0) + 1
    row: dict[str, SqlValue] = {"id": key, "bal": rnd.randint(0, 1000), "name": f"n{key}"}
    if table is ACCT2:
        row["note"] = None
    acct[key] = row
    return RowChange.insert(table, row)


async def write_dir(directory: Path, history: History) -> None:
    async with await FileSink.open(directory, segment_size=8192) as sink:
        for k in range(0, len(history.txns), 25):
            await sink.apply(history.txns[k : k + 25])


@pytest.fixture(scope="module")
def history() -> History:
    return make_history()


@pytest.fixture
async def data_dir(tmp_path: Path, history: History) -> Path:
    directory = tmp_path / "binlog"
    await write_dir(directory, history)
    assert len(list_segments(directory)) > 5
    return directory


async def reparo(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


def table(db: Path, name: str) -> Rows | None:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        try:
            rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
        except sqlite3.OperationalError:
            return None
    return {r["id"]: dict(r) for r in rows}


def checkpoint(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute('SELECT * FROM "tidb_binlog__checkpoint"').fetchall())


def state_at(history: History, ts: int) -> tuple[Rows, Rows]:
    last = [(a, lg) for t, a, lg in history.states if t <= ts][-1]
    return last


async def test_replay_into_sqlite_then_a_rerun_is_a_no_op(
    tmp_path: Path, data_dir: Path, history: History
) -> None:
    db = tmp_path / "down.db"
    assert await reparo("--data-dir", str(data_dir), "--dest-url", f"sqlite://{db}") == 0
    acct, log = state_at(history, history.txns[-1].commit_ts)
    assert table(db, "shop__acct") == acct and len(acct) > 10
    assert table(db, "other__log") == log and len(log) > 10
    assert any(r["note"] is not None for r in acct.values())
    before = checkpoint(db)
    assert str(history.txns[-1].commit_ts) in before
    # Without safe mode, applying any insert twice would fail on its primary key.
    assert await reparo("--data-dir", str(data_dir), "--dest-url", f"sqlite://{db}") == 0
    assert table(db, "shop__acct") == acct and checkpoint(db) == before


async def test_a_ts_range_then_the_rest(tmp_path: Path, data_dir: Path, history: History) -> None:
    db = tmp_path / "down.db"
    stop = history.txns[120].commit_ts
    args = ["--data-dir", str(data_dir), "--dest-url", f"sqlite://{db}", "--txn-batch", "7"]
    assert await reparo(*args, "--stop-tso", str(stop)) == 0
    acct, log = state_at(history, stop)
    assert table(db, "shop__acct") == acct and table(db, "other__log") == log
    assert await reparo(*args, "--start-tso", str(stop + 1)) == 0
    acct, log = state_at(history, history.txns[-1].commit_ts)
    assert table(db, "shop__acct") == acct and table(db, "other__log") == log


async def test_filters(tmp_path: Path, data_dir: Path, history: History) -> None:
    acct, log = state_at(history, history.txns[-1].commit_ts)
    only_shop = tmp_path / "shop.db"
    base = ["--data-dir", str(data_dir)]
    assert await reparo(*base, "--dest-url", f"sqlite://{only_shop}", "--ignore-db", "other") == 0
    assert table(only_shop, "shop__acct") == acct and table(only_shop, "other__log") is None
    only_log = tmp_path / "log.db"
    url = f"sqlite://{only_log}"
    assert await reparo(*base, "--dest-url", url, "--replicate-do-table", "OTHER.~^lo") == 0
    assert table(only_log, "shop__acct") is None and table(only_log, "other__log") == log
    # the filtered transactions still moved the checkpoint: a re-run has nothing to do
    assert str(history.txns[-1].commit_ts) in checkpoint(only_log)


def test_config_file_datetimes_and_the_command_line(tmp_path: Path, history: History) -> None:
    data_dir = tmp_path / "binlog"
    asyncio.run(write_dir(data_dir, history))
    first, last = 50, 90
    local = [time.localtime((BASE_MS + k * 1000) / 1000) for k in (first, last)]
    start, stop = (time.strftime("%Y-%m-%d %H:%M:%S", t) for t in local)
    db = tmp_path / "down.db"
    config = tmp_path / "reparo.toml"
    config.write_text(
        f'data-dir = "{data_dir}"\nstart-datetime = "{start}"\nstop-datetime = "{stop}"\n'
        f'dest-url = "sqlite://{db}"\n[[replicate-do-table]]\ndb-name = "shop"\ntbl-name = "acct"\n'
    )
    # the tables must exist before the range starts: create them with a first run up to then
    pre = ["--data-dir", str(data_dir), "--dest-url", f"sqlite://{db}"]
    assert main([*pre, "--stop-tso", str(commit_ts(first) - 1)]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "services.reparo", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # a datetime is the first ts of its second (logical 0), and the range is inclusive
    acct, _ = state_at(history, tso.compose(BASE_MS + last * 1000, 0))
    assert acct != state_at(history, commit_ts(last))[0]  # the txn at that second is after it
    assert table(db, "shop__acct") == acct
    assert table(db, "other__log") == state_at(history, commit_ts(first) - 1)[1]


async def test_whole_segments_before_the_start_are_not_read(
    tmp_path: Path, data_dir: Path, history: History
) -> None:
    segments = list_segments(data_dir)
    data = bytearray(segments[0].path.read_bytes())
    data[-3] ^= 0xFF  # break the first segment's last record (not its first)
    data.extend(b"garbage that is not a record at all")
    segments[0].path.write_bytes(bytes(data))
    db = tmp_path / "down.db"
    args = ["--data-dir", str(data_dir), "--dest-url", f"sqlite://{db}", "--ignore-db", "~."]
    assert await reparo(*args, "--start-tso", str(history.txns[-40].commit_ts)) == 0
    fresh = ["--data-dir", str(data_dir), "--dest-url", f"sqlite://{tmp_path}/fresh.db"]
    assert await reparo(*fresh) == 1  # from the beginning the damage is found


def test_print_destination(
    data_dir: Path, history: History, capsys: pytest.CaptureFixture[str]
) -> None:
    lo, hi = history.txns[0].commit_ts, history.txns[3].commit_ts
    rc = main(
        ["--data-dir", str(data_dir), "--start-tso", str(lo), "--stop-tso", str(hi), "-L", "error"]
    )
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(" ", 2)[:2] for ln in lines] == [
        [f"commit_ts={t.commit_ts}", "ddl"] for t in history.txns[:4]
    ]
    assert "CREATE TABLE log" in lines[3]


async def test_progress_on_a_terminal_ends_with_a_final_line(
    tmp_path: Path, data_dir: Path, history: History, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "down.db"
    args = ["--data-dir", str(data_dir), "--dest-url", f"sqlite://{db}", "-L", "error"]
    assert await reparo(*args, "--progress", "tty") == 0
    final = capsys.readouterr().err.split("\r")[-1]
    rows = sum(len(t.rows) for t in history.txns)
    assert final.startswith(f"reparo: rows {rows:,}, binlogs {len(history.txns)}, ")
    assert "done in" in final and final.endswith("\n")


def test_progress_without_a_terminal_is_logged(tmp_path: Path, data_dir: Path) -> None:
    db = tmp_path / "down.db"
    argv = ["--data-dir", str(data_dir), "--dest-url", f"sqlite://{db}"]
    proc = subprocess.run(
        [sys.executable, "-m", "services.reparo", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    [final] = [ln for ln in proc.stderr.splitlines() if "reparo: rows " in ln]
    assert "[INFO]" in final and "done in" in final


def test_the_bytes_read_reach_the_size_of_the_files(data_dir: Path, history: History) -> None:
    read = ReadProgress()
    assert len(list(read_txns(data_dir, progress=read))) == len(history.txns)
    assert read.total == sum(s.path.stat().st_size for s in list_segments(data_dir))
    assert read.done == read.total and read.fraction() == 1.0
    from_late = ReadProgress()
    list(read_txns(data_dir, history.txns[-40].commit_ts, progress=from_late))
    assert 0 < from_late.total < read.total and from_late.fraction() == 1.0


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "data-dir" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "--start-datetime", "yesterday"]) == 2
    assert main(["--data-dir", str(tmp_path), "--start-tso", "9", "--stop-tso", "3"]) == 2
    assert main(["--data-dir", str(tmp_path), "--dest-url", "nosuch://x"]) == 2
    assert main(["--data-dir", str(tmp_path / "missing"), "-L", "error"]) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--data-dir", str(empty), "-L", "error"]) == 1


async def test_a_corrupt_record_names_file_and_offset(
    tmp_path: Path, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    second = list_segments(data_dir)[1]
    data = bytearray(second.path.read_bytes())
    data[30] ^= 0xFF  # inside the first record's payload, good records follow
    second.path.write_bytes(bytes(data))
    log_file = tmp_path / "reparo.log"
    args = ["--data-dir", str(data_dir), "--dest-url", f"sqlite://{tmp_path}/d.db"]
    assert await reparo(*args, "--log-file", str(log_file)) == 1
    assert f"{second.path}: corrupt record at offset 0" in log_file.read_text()


def test_reparo_toml_keys(tmp_path: Path) -> None:
    config = tmp_path / "reparo.toml"
    config.write_text(
        'data-dir = "/d"\ndest-type = "print"\nreplicate-ignore-db = ["~^tmp"]\n'
        '[[replicate-ignore-table]]\ndb-name = "a"\ntbl-name = "b"\n'
        '[dest-db]\nhost = "db1"\nport = 3307\nuser = "u"\npassword = "p@ss"\n'
    )
    cfg = load(ReparoConfig, ["--config", str(config), "--ignore-table", "c.d"], {}, "REPARO")
    assert cfg.destination() == "print://"
    # (mysql:// is registered by the MySQL sink; the URL reparo builds for it:)
    assert replace(cfg, dest_type="mysql").destination() == "mysql://u:p%40ss@db1:3307/"
    assert cfg.replicate_ignore_db == ("~^tmp",)
    assert cfg.replicate_ignore_table == (("c", "d"),)  # the flag wins over the file
    assert not cfg.table_filter().allows("tmp1", "x") and not cfg.table_filter().allows("C", "D")
    assert cfg.table_filter().allows("a", "b")
    assert load(ReparoConfig, ["--data-dir", "/d"], {}, "REPARO").destination() == "print://"


def test_an_unknown_destination_is_named_without_its_password() -> None:
    cfg = ReparoConfig(data_dir="/d", dest_url="nosuch://u:s3cret@h:1/")
    problems = dict(cfg.validate())
    assert "nosuch://u:******@h:1/" in problems["dest-url"]
    assert "s3cret" not in problems["dest-url"]
