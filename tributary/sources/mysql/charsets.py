"""Collation ids -> (character set, bytes per character, Python codec).

Character columns in a TABLE_MAP carry a collation id. The server's own table
(``information_schema.COLLATIONS`` joined with ``CHARACTER_SETS``) is loaded when the source
opens (``Charsets.from_rows``); the built-in table covers the usual ids so the decoder works
without it (and in unit tests). The ids are static facts of the server build, not schema, so
reading them today is right for rows of any age.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BINARY = 63


@dataclass(frozen=True, slots=True)
class Charset:
    name: str
    maxlen: int  # bytes per character at most
    codec: str | None  # Python codec; None: binary (values stay bytes)


_CODECS = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "latin1": "cp1252",
    "ascii": "ascii",
    "binary": None,
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "latin2": "iso8859-2",
    "latin5": "iso8859-9",
    "latin7": "iso8859-13",
    "greek": "iso8859-7",
    "hebrew": "iso8859-8",
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc-jp",
    "eucjpms": "euc-jp",
    "euckr": "euc-kr",
    "tis620": "tis-620",
    "macroman": "mac-roman",
}
_MAXLEN = {
    "utf8mb4": 4,
    "utf8mb3": 3,
    "utf8": 3,
    "ucs2": 2,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "gbk": 2,
    "gb2312": 2,
    "gb18030": 4,
    "big5": 2,
    "sjis": 2,
    "cp932": 2,
    "ujis": 3,
    "eucjpms": 3,
    "euckr": 2,
}


def charset(name: str, maxlen: int | None = None) -> Charset:
    """The character set ``name`` (unknown single-byte sets decode as latin-1)."""
    codec = _CODECS.get(name, "latin-1")
    return Charset(name, maxlen if maxlen is not None else _MAXLEN.get(name, 1), codec)


def _builtin() -> dict[int, Charset]:
    ids: dict[int, str] = {BINARY: "binary", 11: "ascii", 65: "ascii"}
    for i in (5, 8, 15, 31, 47, 48, 49, 94):
        ids[i] = "latin1"
    for i in (33, 83, *range(192, 216), 223, *range(576, 580)):
        ids[i] = "utf8mb3"
    for i in (45, 46, *range(224, 248), *range(255, 324), *range(608, 612)):
        ids[i] = "utf8mb4"
    for i in (35, 90, *range(128, 152), 159):
        ids[i] = "ucs2"
    for i in (54, 55, *range(101, 125)):
        ids[i] = "utf16"
    for i in (60, 61, *range(160, 184)):
        ids[i] = "utf32"
    return {i: charset(n) for i, n in ids.items()}


_BUILTIN = _builtin()  # built once: a Charset is immutable, each table copies the dict


class Charsets:
    """Collation id -> Charset; unknown ids fall back to utf8mb4 with a flag set."""

    def __init__(self, table: dict[int, Charset] | None = None) -> None:
        self._table = dict(_BUILTIN)
        if table:
            self._table.update(table)
        self.unknown: set[int] = set()

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, str, int]]) -> Charsets:
        """From ``(collation id, character set name, maxlen)`` rows of the server."""
        return cls({int(i): charset(str(n), int(m)) for i, n, m in rows if i is not None})

    def get(self, collation: int) -> Charset:
        cs = self._table.get(collation)
        if cs is None:
            self.unknown.add(collation)
            return self._table[45]
        return cs
