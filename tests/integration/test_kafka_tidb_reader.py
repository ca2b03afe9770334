"""TiDB's own secondary-binlog reader (``tidb-binlog/driver/reader`` of github.com/pingcap/tidb,
built by ``scripts/go-tools binlogreader``) consumes what the kafka:// sink wrote to a real broker:
every transaction and DDL, in commit order, with its tables, columns, key and row values."""

from __future__ import annotations

import asyncio
import base64
import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tests.support.gotools import go_tool
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]

T = TableInfo.build(
    "shop",
    "items",
    [
        ("id", "bigint"),
        ("qty", "int unsigned"),
        ("name", "varchar(32)"),
        ("price", "decimal(10,2)"),
        ("ratio", "double"),
        ("blob", "varbinary(8)"),
        ("at", "datetime"),
    ],
    ["id"],
    {"uk_name": ["name"]},
)
U = TableInfo.build("shop", "tags", [("k", "varchar(8)")], [], {"uk": ["k"]})


def row(i: int, name: str | None = None) -> dict[str, Any]:
    return {
        "id": i,
        "qty": 2**63 + i,
        "name": name if name is not None else f"n{i}",
        "price": Decimal(f"{i}.25"),
        "ratio": i / 4,
        "blob": bytes([i, 0, 255]),
        "at": f"2024-01-0{i} 10:00:00",
    }


TXNS = [
    Txn(100, ddl=Ddl("shop", "CREATE TABLE items (...)", "items")),
    Txn(110, 105, rows=(RowChange.insert(T, row(1)), RowChange.insert(U, {"k": "a"}))),
    Txn(120, 115, rows=(RowChange.update(T, row(1), row(1, "renamed")),)),
    Txn(130, 125, rows=(RowChange.insert(T, row(2)), RowChange.delete(T, row(1, "renamed")))),
    Txn(140, ddl=Ddl("shop", "ALTER TABLE items ADD c INT", "items")),
    Txn(150, 145, rows=(RowChange.insert(T, {**row(3), "name": None, "ratio": None}),)),
]


def value(col: dict[str, Any]) -> Any:
    """A column as the reader printed it, in the sink's terms."""
    if col.get("null"):
        return None
    for kind in ("int", "uint", "double", "string"):
        if kind in col:
            return col[kind]
    return base64.b64decode(col["bytes"]) if "bytes" in col else None


def expected(values: dict[str, Any]) -> list[Any]:
    return [
        values["id"],
        values["qty"],
        values["name"],
        None if values["price"] is None else str(values["price"]),
        values["ratio"],
        values["blob"],
        values["at"],
    ]


async def test_tidb_reader_reads_every_transaction(kafka: KafkaBroker) -> None:
    binary = go_tool("binlogreader")
    async with open_sink(f"kafka://{kafka.bootstrap}/", SinkOptions(cluster_id=77)) as sink:
        await sink.apply(TXNS[:3])
        await sink.apply(TXNS[3:])
    proc = await asyncio.create_subprocess_exec(
        str(binary),
        *("-brokers", kafka.bootstrap, "-cluster-id", "77", "-count", str(len(TXNS))),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-2000:]
    got = [json.loads(line) for line in out.decode().splitlines()]

    assert [m["commit_ts"] for m in got] == [t.commit_ts for t in TXNS]
    assert [m["type"] for m in got] == ["DDL", "DML", "DML", "DML", "DDL", "DML"]
    assert [(m["schema"], m["ddl_table"], m["ddl"]) for m in got if m["type"] == "DDL"] == [
        ("shop", "items", "CREATE TABLE items (...)"),
        ("shop", "items", "ALTER TABLE items ADD c INT"),
    ]
    first = got[1]["tables"]
    assert [(t["schema"], t["table"]) for t in first] == [("shop", "items"), ("shop", "tags")]
    items = first[0]
    assert items["columns"] == ["id", "qty", "name", "price", "ratio", "blob", "at"]
    assert items["types"] == [
        "bigint",
        "int",
        "varchar",
        "decimal",
        "double",
        "varbinary",
        "datetime",
    ]
    assert items["unique_keys"] == ["PRIMARY(id)", "uk_name(name)"]
    assert first[1]["unique_keys"] == ["uk(k)"]
    assert [value(c) for c in first[1]["mutations"][0]["row"]] == ["a"]

    def mutations(m: dict[str, Any]) -> list[tuple[str, list[Any], list[Any] | None]]:
        return [
            (
                mu["type"],
                [value(c) for c in mu["row"]],
                [value(c) for c in mu["change_row"]] if "change_row" in mu else None,
            )
            for t in m["tables"]
            if t["table"] == "items"
            for mu in t["mutations"]
        ]

    assert mutations(got[1]) == [("Insert", expected(row(1)), None)]
    assert mutations(got[2]) == [("Update", expected(row(1, "renamed")), expected(row(1)))]
    assert mutations(got[3]) == [
        ("Insert", expected(row(2)), None),
        ("Delete", expected(row(1, "renamed")), None),
    ]
    assert mutations(got[5]) == [
        ("Insert", expected({**row(3), "name": None, "ratio": None}), None)
    ]
