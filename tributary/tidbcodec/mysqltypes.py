"""MySQL column type codes and flags (TiDB ``parser/mysql/type.go``) and a column's type info.

:class:`ColumnType` carries what TiDB's ``FieldType`` carries for a column
in table info (``tp``, ``flag``, ``flen``, ``decimal``, ``elems``, charset and
collation); it is all :mod:`tidbcodec.convert` needs to turn datums into
Python values and back.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_UNSPECIFIED = 0  # also the legacy TypeDecimal
TYPE_DECIMAL = 0
TYPE_TINY = 1
TYPE_SHORT = 2
TYPE_LONG = 3
TYPE_FLOAT = 4
TYPE_DOUBLE = 5
TYPE_NULL = 6
TYPE_TIMESTAMP = 7
TYPE_LONGLONG = 8
TYPE_INT24 = 9
TYPE_DATE = 10
TYPE_DURATION = 11  # MySQL TIME
TYPE_DATETIME = 12
TYPE_YEAR = 13
TYPE_NEWDATE = 14
TYPE_VARCHAR = 15
TYPE_BIT = 16
TYPE_JSON = 0xF5
TYPE_NEWDECIMAL = 0xF6
TYPE_ENUM = 0xF7
TYPE_SET = 0xF8
TYPE_TINY_BLOB = 0xF9
TYPE_MEDIUM_BLOB = 0xFA
TYPE_LONG_BLOB = 0xFB
TYPE_BLOB = 0xFC
TYPE_VAR_STRING = 0xFD
TYPE_STRING = 0xFE
TYPE_GEOMETRY = 0xFF

NOT_NULL_FLAG = 1 << 0
PRI_KEY_FLAG = 1 << 1
UNIQUE_KEY_FLAG = 1 << 2
MULTIPLE_KEY_FLAG = 1 << 3
BLOB_FLAG = 1 << 4
UNSIGNED_FLAG = 1 << 5
ZEROFILL_FLAG = 1 << 6
BINARY_FLAG = 1 << 7
ENUM_FLAG = 1 << 8
AUTO_INCREMENT_FLAG = 1 << 9
TIMESTAMP_FLAG = 1 << 10
SET_FLAG = 1 << 11
NO_DEFAULT_VALUE_FLAG = 1 << 12
ON_UPDATE_NOW_FLAG = 1 << 13
PART_KEY_FLAG = 1 << 14
NUM_FLAG = 1 << 15

UNSPECIFIED_LENGTH = -1
MAX_FSP = 6

INTEGER_TYPES = frozenset({TYPE_TINY, TYPE_SHORT, TYPE_INT24, TYPE_LONG, TYPE_LONGLONG})
TIME_TYPES = frozenset({TYPE_DATE, TYPE_DATETIME, TYPE_TIMESTAMP, TYPE_NEWDATE})
DECIMAL_TYPES = frozenset({TYPE_DECIMAL, TYPE_NEWDECIMAL})
STRING_TYPES = frozenset(
    {
        TYPE_VARCHAR,
        TYPE_VAR_STRING,
        TYPE_STRING,
        TYPE_TINY_BLOB,
        TYPE_MEDIUM_BLOB,
        TYPE_LONG_BLOB,
        TYPE_BLOB,
    }
)

# Charsets whose bytes TiDB keeps as UTF-8 (TiDB treats latin1 as a UTF-8 subset).
_UTF8_CHARSETS = frozenset({"", "utf8", "utf8mb4", "ascii", "latin1"})
_PYTHON_CODECS = {"gbk": "gbk", "gb18030": "gb18030"}


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A column's type, as in TiDB's ``FieldType`` (table info JSON ``Tp``, ``Flag``, ...)."""

    tp: int
    flag: int = 0
    flen: int = UNSPECIFIED_LENGTH
    decimal: int = UNSPECIFIED_LENGTH
    elems: tuple[str, ...] = ()
    charset: str = ""
    collate: str = ""

    @property
    def unsigned(self) -> bool:
        return bool(self.flag & UNSIGNED_FLAG)

    @property
    def is_binary_string(self) -> bool:
        """Bytes, not text: charset ``binary`` (BINARY/VARBINARY/BLOB) or the binary flag."""
        return self.charset == "binary" or (not self.charset and bool(self.flag & BINARY_FLAG))

    @property
    def text_encoding(self) -> str:
        """Python codec for the column's stored bytes."""
        charset = self.charset.lower()
        if charset in _UTF8_CHARSETS:
            return "utf-8"
        return _PYTHON_CODECS.get(charset, "utf-8")

    @property
    def fsp(self) -> int:
        """Fractional seconds precision of a temporal column (0..6)."""
        if 0 <= self.decimal <= MAX_FSP:
            return self.decimal
        return 0 if self.decimal == UNSPECIFIED_LENGTH else MAX_FSP
