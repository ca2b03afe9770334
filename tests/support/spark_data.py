"""Row changes for the Spark tests: two keyed tables, a seeded mix of inserts, updates of
existing keys (some changing the key), deletes and re-inserts, as ``change.model`` transactions."""

from __future__ import annotations

import random
from decimal import Decimal

from tributary.change import Ddl, RowChange, TableInfo, Txn

ITEMS_COLUMNS = [
    ("id", "bigint"),
    ("name", "varchar(40)"),
    ("qty", "int"),
    ("price", "decimal(10,2)"),
    ("at", "datetime"),
    ("raw", "varbinary(16)"),
    ("big", "bigint unsigned"),
]
ITEMS_DDL = (
    "CREATE TABLE items (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL, qty INT NULL, "
    "price DECIMAL(10,2) NOT NULL, at DATETIME NOT NULL, raw VARBINARY(16) NULL, "
    "big BIGINT UNSIGNED NOT NULL, UNIQUE KEY uname (name))"
)
PAIRS_DDL = "CREATE TABLE pairs (a INT NOT NULL, b VARCHAR(10) NOT NULL, v INT, PRIMARY KEY (a, b))"


def items(schema: str) -> TableInfo:
    return TableInfo.build(schema, "items", ITEMS_COLUMNS, ["id"], {"uname": ["name"]})


def pairs(schema: str) -> TableInfo:
    return TableInfo.build(
        schema, "pairs", [("a", "int"), ("b", "varchar(10)"), ("v", "int")], ["a", "b"]
    )


def ddls(schema: str, ts: int) -> list[Txn]:
    return [
        Txn(ts, ts - 1, ddl=Ddl("", f"CREATE DATABASE {schema}")),
        Txn(ts + 1, ts, ddl=Ddl(schema, ITEMS_DDL, "items")),
        Txn(ts + 2, ts + 1, ddl=Ddl(schema, PAIRS_DDL, "pairs")),
    ]


def _item(rng: random.Random, rid: int, gen: int) -> dict[str, object]:
    return {
        "id": rid,
        "name": f"n{rid}-{gen}",
        "qty": None if rng.random() < 0.2 else rng.randrange(-1000, 1000),
        "price": str(Decimal(rng.randrange(0, 10**6)) / 100),
        "at": f"2024-0{rng.randrange(1, 10)}-1{rng.randrange(0, 10)} 12:34:{rng.randrange(10, 60)}",
        "raw": None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 16)),
        "big": rng.choice([0, 1, (1 << 64) - 1, rng.getrandbits(63)]),
    }


def workload(schema: str, first_ts: int, txns: int, seed: int) -> list[Txn]:
    """``txns`` transactions from commit ts ``first_ts`` up (step 10)."""
    rng = random.Random(seed)
    it, pt = items(schema), pairs(schema)
    live: dict[int, dict[str, object]] = {}
    plive: dict[tuple[int, str], dict[str, object]] = {}
    next_id, gen = 1, 0
    out: list[Txn] = []
    for i in range(txns):
        rows: list[RowChange] = []
        touched: set[int] = set()
        for _ in range(rng.randint(1, 6)):
            gen += 1
            p = rng.random()
            if p < 0.45 or len(live) < 5:
                row = _item(rng, next_id, gen)
                next_id += 1
                live[int(row["id"])] = row  # type: ignore[call-overload]
                rows.append(RowChange.insert(it, row))  # type: ignore[arg-type]
                touched.add(next_id - 1)
                continue
            rid = rng.choice(sorted(live))
            if rid in touched:
                continue
            touched.add(rid)
            old = live[rid]
            if p < 0.75:
                new = {**_item(rng, rid, gen), "name": old["name"]}
                live[rid] = new
                rows.append(RowChange.update(it, old, new))  # type: ignore[arg-type]
            elif p < 0.85:  # the key changes
                new = {**old, "id": next_id}
                next_id += 1
                del live[rid]
                live[int(new["id"])] = new  # type: ignore[call-overload]
                touched.add(int(new["id"]))  # type: ignore[call-overload]
                rows.append(RowChange.update(it, old, new))  # type: ignore[arg-type]
            else:
                del live[rid]
                rows.append(RowChange.delete(it, old))  # type: ignore[arg-type]
        key = (rng.randrange(20), rng.choice("abc"))
        if key in plive and rng.random() < 0.3:
            rows.append(RowChange.delete(pt, plive.pop(key)))  # type: ignore[arg-type]
        elif key in plive:
            new = {"a": key[0], "b": key[1], "v": rng.randrange(100)}
            rows.append(RowChange.update(pt, plive[key], new))  # type: ignore[arg-type]
            plive[key] = new
        else:
            plive[key] = {"a": key[0], "b": key[1], "v": rng.randrange(100)}
            rows.append(RowChange.insert(pt, plive[key]))  # type: ignore[arg-type]
        ts = first_ts + 10 * i
        out.append(Txn(ts, ts - 1, rows=tuple(rows)))
    return out
