"""TiCDC's CSV protocol: row changes to CSV records and back (``pkg/sink/codec/csv``).

A record is ``op, table, schema, [commit-ts], [is-update], column values...`` then the
terminator. ``op`` is ``I``, ``U`` or ``D``; the commit ts is there with
``csv.include-commit-ts``; ``is-update`` (``true``/``false``) with ``csv.output-old-value``,
which also writes an UPDATE as two records, ``D`` with the old row and ``I`` with the new one
(both ``true``). Fields are written as TiCDC's ``formatValue`` writes them: strings between the
quote character, a quote inside doubled (``"a""b"``); with an empty ``csv.quote`` not quoted but
with CR, LF, backslash and the delimiter escaped by a backslash (``a\\,b``); NULL as
``csv.null``; numbers, the commit ts and ``is-update`` bare. TiCDC's example, with
``include-commit-ts`` and terminator LF::

    "I","employee","hr",433305438660591626,101,"Smith","Bob","2014-06-04","New York"

Values (TiCDC's ``fromColValToCsvVal``): integers, YEAR and BIT as numbers; FLOAT and DOUBLE as
Go's ``%v`` writes a float32 or float64 (``153.123``, ``1e+06``); DECIMAL, temporal values,
JSON and text as strings; binary strings (BINARY, VARBINARY, BLOBs) as base64 or hex strings
(``csv.binary-encoding-method``); ENUM and SET as their member names. A row image without every
column of the table (``binlog_row_image`` other than FULL) cannot be written: its record would
not line up with the table's columns.

``parse`` reads records back (quoted fields, escapes and the null string told apart), and
``value_of`` turns a field into the value a sink takes, by the column's TiCDC type.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeVar

from tributary.change import Row, RowChange, RowKind, SqlValue, TableInfo
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka.secondary import type_name
from tributary.sinks.port import SinkError
from tributary.sinks.storage.settings import CsvSettings
from tributary.sinks.storage.tabledef import TableCol
from tributary.tidbcodec.enumset import enum_name, set_names, set_to_str

_FLOAT32 = struct.Struct("<f")
_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year", "bit"})


class Bare(str):
    """A field written as it is, never quoted or escaped: numbers, the commit ts, booleans."""

    __slots__ = ()


Field = str | None  # a string field (quoted), a Bare one, or NULL


def go_g(value: float, bits: int = 64) -> str:
    """A float as Go's ``fmt`` ``%v`` writes a float64 (or float32): its shortest digits, in
    exponent form when the exponent is below -4 or at least 6 (``1e+06``, ``1.5e-05``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    text = repr(value)
    if bits == 32:
        for n in range(1, 10):
            short = f"{value:.{n}g}"
            if _FLOAT32.unpack(_FLOAT32.pack(float(short)))[0] == value:
                text = short
                break
    sign, digit_tuple, exp = Decimal(text).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exp, int)
    point = len("".join(map(str, digit_tuple))) + exp  # where the decimal point goes
    minus = "-" if sign else ""
    x = point - 1
    if x < -4 or x >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{minus}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return minus + digits + "0" * (point - len(digits))
    return f"{minus}{digits[:point]}.{digits[point:]}"


# -- encoding -----------------------------------------------------------------------------------


def format_field(value: Field, csv: CsvSettings) -> str:
    """One field as TiCDC's ``formatValue`` writes it (without the delimiter before it)."""
    if value is None:
        return csv.null
    if isinstance(value, Bare):
        return str(value)
    if csv.quote:
        return csv.quote + value.replace(csv.quote, csv.quote * 2) + csv.quote
    return _escape(value, csv.delimiter)


def _escape(value: str, delimiter: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        if value.startswith(delimiter, i):
            out.append("".join("\\" + c for c in delimiter))
            i += len(delimiter)
            continue
        c = value[i]
        out.append({"\r": "\\r", "\n": "\\n", "\\": "\\\\"}.get(c, c))
        i += 1
    return "".join(out)


def format_record(fields: Sequence[Field], csv: CsvSettings, terminator: str) -> str:
    return csv.delimiter.join(format_field(f, csv) for f in fields) + terminator


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    ct: ColType
    kind: str  # TiDB's type name (TypeToStr)


class CsvEncoder:
    """Row changes of one changefeed as CSV records; one plan per table definition."""

    def __init__(self, csv: CsvSettings, terminator: str) -> None:
        self.csv = csv
        self.terminator = terminator
        self._plans: dict[TableInfo, tuple[_Column, ...]] = {}

    def encode(self, change: RowChange, commit_ts: int) -> str:
        """The record(s) of one row change (two for an UPDATE with ``output-old-value``)."""
        csv = self.csv
        t = change.table
        plan = self._plans.get(t)
        if plan is None:
            plan = self._plans[t] = tuple(
                _Column(c.name, ct := column_type(c.mysql_type), type_name(ct)) for c in t.columns
            )
        if change.kind is RowKind.UPDATE and csv.output_old_value:
            assert change.old_values is not None
            return self._record("D", t, commit_ts, True, plan, change.old_values) + self._record(
                "I", t, commit_ts, True, plan, change.values
            )
        op = {RowKind.INSERT: "I", RowKind.UPDATE: "U", RowKind.DELETE: "D"}[change.kind]
        return self._record(op, t, commit_ts, False, plan, change.values)

    def _record(
        self,
        op: str,
        t: TableInfo,
        commit_ts: int,
        is_update: bool,
        plan: tuple[_Column, ...],
        row: Row,
    ) -> str:
        fields: list[Field] = [op, t.table, t.schema]
        if self.csv.include_commit_ts:
            fields.append(Bare(commit_ts))
        if self.csv.output_old_value:
            fields.append(Bare("true" if is_update else "false"))
        for col in plan:
            try:
                value = row[col.name]
            except KeyError:
                raise SinkError(
                    f"csv: the row of {t.qualified} has no value for column {col.name!r}: the "
                    "upstream must log whole rows (binlog_row_image=FULL)",
                    retriable=False,
                ) from None
            fields.append(self._field(col, value))
        return format_record(fields, self.csv, self.terminator)

    def _field(self, col: _Column, value: SqlValue) -> Field:
        if value is None:
            return None
        kind, ct = col.kind, col.ct
        if kind in _INTEGERS:
            if isinstance(value, bytes):
                value = int.from_bytes(value, "big")
            return Bare(int(value) if isinstance(value, int | Decimal) else value)
        if kind in ("float", "double"):
            if isinstance(value, int | float | Decimal):
                return Bare(go_g(float(value), 32 if kind == "float" else 64))
            return Bare(str(value))
        if isinstance(value, Decimal):
            return format(value, "f")
        if kind == "enum" and isinstance(value, int):
            return enum_name(ct.elems, value)
        if kind == "set" and isinstance(value, int):
            return set_to_str(ct.elems, set_names(ct.elems, value))
        if ct.binary:
            raw = value if isinstance(value, bytes) else str(value).encode()
            if self.csv.binary_encoding == "hex":
                return raw.hex()
            return base64.b64encode(raw).decode("ascii")
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return str(value)


# -- decoding -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CsvRecord:
    op: str  # I, U or D
    table: str
    schema: str
    commit_ts: int  # 0 without include-commit-ts
    is_update: bool | None  # None without output-old-value
    values: tuple[str | None, ...]  # each column's text; None for NULL


class CsvDecodeError(SinkError, ValueError):
    """Text that is not TiCDC's CSV as the settings describe it."""


def parse(text: str, csv: CsvSettings, terminator: str) -> Iterator[CsvRecord]:
    """The records of a data file's text."""
    meta = 3 + csv.include_commit_ts + csv.output_old_value
    for fields in _split(text, csv, terminator):
        if len(fields) < meta:
            raise CsvDecodeError(f"a record has {len(fields)} fields, fewer than {meta}")
        op, table, schema = fields[0], fields[1], fields[2]
        if op not in ("I", "U", "D") or table is None or schema is None:
            raise CsvDecodeError(f"not a record of a row change: {fields[:3]!r}")
        i = 3
        ts = 0
        if csv.include_commit_ts:
            ts = _number(fields[i], int, "the commit ts")
            i += 1
        is_update = None
        if csv.output_old_value:
            is_update = fields[i] == "true"
            i += 1
        yield CsvRecord(op, table, schema, ts, is_update, tuple(fields[i:]))


_N = TypeVar("_N", int, float, Decimal)


def _number(text: str | None, kind: type[_N], what: str) -> _N:
    try:
        return kind(text or "")
    except (ValueError, ArithmeticError) as e:
        raise CsvDecodeError(f"{what}: {text!r} is not a number") from e


def _split(text: str, csv: CsvSettings, terminator: str) -> Iterator[list[str | None]]:
    pos, end = 0, len(text)
    delim, quote = csv.delimiter, csv.quote
    while pos < end:
        fields: list[str | None] = []
        while True:
            if quote and text.startswith(quote, pos):
                value, pos = _quoted(text, pos + 1, quote)
                fields.append(value)
            else:
                stop = _field_end(text, pos, delim, terminator, escaped=not quote)
                raw = text[pos:stop]
                fields.append(None if raw == csv.null else (raw if quote else _unescape(raw)))
                pos = stop
            if text.startswith(delim, pos):
                pos += len(delim)
                continue
            if text.startswith(terminator, pos):
                pos += len(terminator)
                break
            if pos >= end:
                break
            raise CsvDecodeError(f"unexpected {text[pos : pos + 10]!r} at offset {pos}")
        yield fields


def _quoted(text: str, pos: int, quote: str) -> tuple[str, int]:
    parts: list[str] = []
    while True:
        close = text.find(quote, pos)
        if close < 0:
            raise CsvDecodeError("a quoted field does not end")
        parts.append(text[pos:close])
        if text.startswith(quote, close + 1):
            parts.append(quote)
            pos = close + 2
            continue
        return "".join(parts), close + 1


def _field_end(text: str, pos: int, delim: str, terminator: str, *, escaped: bool) -> int:
    i = pos
    while i < len(text):
        if escaped and text[i] == "\\":
            i += 2
            continue
        if text.startswith(delim, i) or text.startswith(terminator, i):
            return i
        i += 1
    return len(text)


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            out.append({"n": "\n", "r": "\r"}.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def value_of(text: str | None, col: TableCol, binary_encoding: str = "base64") -> SqlValue:
    """A field's value as the sinks take it, by its column's TiCDC type (TiCDC's
    ``fromCsvValToColValue``): numbers for integer, BIT and YEAR columns, floats for FLOAT and
    DOUBLE, Decimal for DECIMAL, bytes for binary strings, text for everything else."""
    if text is None:
        return None
    kind = col.type.lower().partition(" ")[0]
    if kind in _INTEGERS:
        return _number(text, int, f"column {col.name}")
    if kind in ("float", "double"):
        return _number(text, float, f"column {col.name}")
    if kind == "decimal":
        return _number(text, Decimal, f"column {col.name}")
    if kind in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        try:
            if binary_encoding == "hex":
                return bytes.fromhex(text)
            return base64.b64decode(text, validate=True)
        except (ValueError, binascii.Error) as e:
            raise CsvDecodeError(f"column {col.name}: {text!r} is not {binary_encoding}") from e
    return text
