"""The demo's ``bank`` table and how its transactions travel inside binlogs.

``CREATE TABLE bank (id BIGINT PRIMARY KEY, balance BIGINT)``: table id 100,
column ids 1 (id) and 2 (balance), the int primary key is the row handle. A
transaction opens an account (one inserted row) or moves money between two
accounts (two updated rows). Rows use TiDB's old row format through
``tidbcodec``, laid out as TiDB's binlog writer does: an inserted row is the
handle datum followed by every column; an updated row is the full old row
followed by the full new row. Example: opening account 7 with 1000 gives the
inserted row ``IntDatum(7) | 1, 7, 2, 1000``.

Invariants: ``decode_txn(encode_txn(c)) == c``; :meth:`Ledger.apply` refuses a
change whose old row is not the ledger's current row, so replaying commits in
any order but the one they happened in is caught.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from services.demo.errors import DemoError
from tidbcodec import (
    CodecError,
    Datum,
    IntDatum,
    decode_inserted_row,
    decode_updated_row,
    encode_inserted_row,
    encode_updated_row,
)
from wire.binlog import MutationType, PrewriteValue, TableMutation

TABLE_ID = 100
SCHEMA_VERSION = 1
COL_ID, COL_BALANCE = 1, 2
INSERT = MutationType(MutationType.Insert)
UPDATE = MutationType(MutationType.Update)


class BankError(DemoError):
    """A prewrite value that is not a bank transaction, or a change that does not fit."""


@dataclass(frozen=True, slots=True)
class Row:
    id: int
    balance: int

    def columns(self) -> list[tuple[int, Datum]]:
        return [(COL_ID, IntDatum(self.id)), (COL_BALANCE, IntDatum(self.balance))]


@dataclass(frozen=True, slots=True)
class Change:
    """One row change: an insert when ``old`` is None, else an update of ``old`` to ``new``."""

    old: Row | None
    new: Row


def row_key(row_id: int) -> bytes:
    """A readable stand-in for TiDB's record key ``t{table}_r{handle}``."""
    return b"t%d_r%d" % (TABLE_ID, row_id)


def encode_txn(changes: Sequence[Change]) -> bytes:
    """The marshalled ``PrewriteValue`` of a bank transaction."""
    mutation = TableMutation(table_id=TABLE_ID)
    for change in changes:
        if change.old is None:
            row = encode_inserted_row([IntDatum(change.new.id)], change.new.columns())
            mutation.inserted_rows.append(row)
            mutation.sequence.append(INSERT)
        else:
            mutation.updated_rows.append(
                encode_updated_row(change.old.columns(), change.new.columns())
            )
            mutation.sequence.append(UPDATE)
    return bytes(PrewriteValue(schema_version=SCHEMA_VERSION, mutations=[mutation]))


def decode_txn(prewrite_value: bytes) -> tuple[Change, ...]:
    """The changes in a ``PrewriteValue``; BankError if it is not a bank transaction."""
    try:
        value = PrewriteValue().parse(prewrite_value)
    except Exception as e:  # betterproto raises assorted errors on garbage
        raise BankError(f"prewrite value is not a PrewriteValue: {e!r}") from e
    if len(value.mutations) != 1 or value.mutations[0].table_id != TABLE_ID:
        tables = [m.table_id for m in value.mutations]
        raise BankError(f"expected one mutation of table {TABLE_ID}, got tables {tables}")
    mutation = value.mutations[0]
    inserted, updated = iter(mutation.inserted_rows), iter(mutation.updated_rows)
    changes: list[Change] = []
    try:
        for kind in mutation.sequence:
            if kind == INSERT:
                handle, cols = decode_inserted_row(next(inserted))
                row = _row(cols)
                if handle != [IntDatum(row.id)]:
                    raise BankError(f"handle {handle} does not match id {row.id}")
                changes.append(Change(None, row))
            elif kind == UPDATE:
                old, new = decode_updated_row(next(updated))
                changes.append(Change(_row(old), _row(new)))
            else:
                raise BankError(f"unexpected mutation type {kind!r}")
    except StopIteration:
        raise BankError("mutation sequence names more rows than it carries") from None
    except CodecError as e:
        raise BankError(f"row does not decode: {e}") from e
    if next(inserted, None) is not None or next(updated, None) is not None:
        raise BankError("mutation carries rows its sequence does not name")
    return tuple(changes)


def _row(cols: dict[int, Datum]) -> Row:
    row_id, balance = cols.get(COL_ID), cols.get(COL_BALANCE)
    if not isinstance(row_id, IntDatum) or not isinstance(balance, IntDatum) or len(cols) != 2:
        raise BankError(f"not a bank row: {cols}")
    return Row(row_id.value, balance.value)


class Ledger:
    """Account balances built by applying transactions in order."""

    def __init__(self) -> None:
        self.balances: dict[int, int] = {}

    @property
    def total(self) -> int:
        return sum(self.balances.values())

    def check(self, changes: Iterable[Change]) -> None:
        """BankError unless every change starts from the ledger's current row."""
        for change in changes:
            current = self.balances.get(change.new.id)
            if change.old is None:
                if current is not None:
                    raise BankError(f"account {change.new.id} opened twice")
            elif change.old.id != change.new.id or current != change.old.balance:
                raise BankError(
                    f"account {change.old.id}: update expects balance {change.old.balance}, "
                    f"ledger has {current}"
                )

    def apply(self, changes: Sequence[Change]) -> None:
        """Apply a whole transaction, or nothing (BankError) if it does not fit."""
        self.check(changes)
        for change in changes:
            self.balances[change.new.id] = change.new.balance
