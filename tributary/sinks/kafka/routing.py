"""Which messages a transaction becomes, and on which partition each goes.

Default (tidb-binlog's): one secondary binlog per transaction or DDL, partition 0, no key. The
opt-ins keep order per table (``partition-by = table``) or per row key (``key``): the partition is
Kafka's own murmur2 hash of the message key (as the Java client's default partitioner computes it)
modulo the topic's partition count, and the rows of one transaction are grouped per partition, in
their order, into one message each (``message-per = txn``) or sent one message per row change
(``row``). A DDL goes to every partition, so a reader of any partition sees it between the rows
before and after it.

Example, ``partition-by = key`` over 3 partitions, txn 40 = [insert t(1), insert t(2), update
t(1)] where key ``db.t:(1,)`` hashes to partition 2 and ``db.t:(2,)`` to 0: ``txn`` gives
(p2, [insert 1, update 1]) then (p0, [insert 2]); ``row`` gives three messages, p2, p0, p2.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from aiokafka.partitioner import murmur2

from tributary.change import RowChange, Txn
from tributary.sinks.kafka.secondary import encode_txn


@dataclass(frozen=True, slots=True)
class Message:
    txn: Txn  # what the message holds (a part of the upstream transaction in the opt-in modes)
    partition: int
    key: bytes | None
    value: bytes


def table_key(row: RowChange) -> bytes:
    return row.table.qualified.encode()


def row_key(row: RowChange) -> bytes:
    """``schema.table:(values of the primary key, else a unique key, else every column)``; an
    update is keyed by its new values (a key change moves the row to the new key's order)."""
    values = row.values
    cols = row.table.where_columns(values)
    return f"{row.table.qualified}:{tuple(values.get(c) for c in cols)!r}".encode()


def partition_of(key: bytes, partitions: int) -> int:
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


def route(txn: Txn, partition_by: str, message_per: str, partitions: int) -> Iterator[Message]:
    """The messages of ``txn`` in the order they are to be sent (nothing for a marker)."""
    if txn.ddl is not None:
        value = encode_txn(txn)
        assert value is not None
        targets = range(partitions) if partition_by != "fixed" else range(1)
        key = txn.ddl.schema.encode() if partition_by != "fixed" else None
        for p in targets:
            yield Message(txn, p, key, value)
        return
    if not txn.rows:
        return
    if partition_by == "fixed" and message_per == "txn":
        value = encode_txn(txn)
        assert value is not None
        yield Message(txn, 0, None, value)
        return
    keyed = [(_key(r, partition_by), r) for r in txn.rows]
    if message_per == "row":
        for key, r in keyed:
            part = partition_of(key, partitions) if key is not None else 0
            yield _message(txn, (r,), part, key)
        return
    groups: dict[int, list[RowChange]] = {}
    keys: dict[int, bytes | None] = {}
    for key, r in keyed:
        part = partition_of(key, partitions) if key is not None else 0
        groups.setdefault(part, []).append(r)
        keys.setdefault(part, key if partition_by == "table" else None)
    for part, rows in groups.items():
        yield _message(txn, tuple(rows), part, keys[part])


def _key(row: RowChange, partition_by: str) -> bytes | None:
    if partition_by == "table":
        return table_key(row)
    if partition_by == "key":
        return row_key(row)
    return None


def _message(txn: Txn, rows: tuple[RowChange, ...], partition: int, key: bytes | None) -> Message:
    part = txn if rows == txn.rows else replace(txn, rows=rows)
    value = encode_txn(part)
    assert value is not None
    return Message(part, partition, key, value)
