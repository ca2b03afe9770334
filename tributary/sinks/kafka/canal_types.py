"""canal-json's per-column rules, as TiCDC's encoder applies them: ``sqlType``, ``mysqlType``,
the text of a value, and a DDL's ``type``.

``sqlType`` is the column's java.sql.Types code (TiCDC's ``MySQLType2JavaType``): TINYINT -6,
SMALLINT 5, MEDIUMINT and INT 4, BIGINT -5, FLOAT 7, DOUBLE 8, DECIMAL 3, DATE 91, TIME 92,
DATETIME and TIMESTAMP 93, YEAR 12, CHAR 1, VARCHAR 12, the TEXTs 2005, BINARY, VARBINARY and
the BLOBs 2004, ENUM 4, SET -7, BIT -7, JSON 12. An unsigned TINYINT, SMALLINT, INT or BIGINT
whose value does not fit the signed type takes the next wider code (TINYINT UNSIGNED 200 ->
5, INT UNSIGNED 2^31 -> -5, BIGINT UNSIGNED 2^63 -> 3); MEDIUMINT UNSIGNED stays 4 at every
value, as does every unsigned FLOAT, DOUBLE, DECIMAL, BIT or YEAR.

``mysqlType`` by default is TiDB's ``TypeToStr`` of the column: the bare type name (``decimal``,
``varchar``, ``enum``; ``binary``/``varbinary``/``blob`` for a binary-charset CHAR, VARCHAR or
TEXT), then `` unsigned`` (not for BIT and YEAR) and `` zerofill`` (not for YEAR). With
``content-compatible`` it is the full type as TiDB's ``GetTypeDesc`` writes it: ``int(11)``,
``int(10) unsigned``, ``decimal(10,2)``, ``char(16)``, ``datetime(3)``, ``year(4)``,
``enum('a','b')``; a display width the binlog does not carry is MySQL's default for the type.

Values (TiCDC's ``formatValue``, null for NULL): integers, BIT, YEAR in decimal; ENUM its
1-based index, SET its bit mask; FLOAT and DOUBLE as Go's ``strconv.FormatFloat(v, 'f', -1,
32|64)``: the shortest digits that read back to the same float32/float64, never an exponent
(1e20 -> ``100000000000000000000``, 1.0 -> ``1``); DECIMAL, temporal and JSON values as their
MySQL text; a binary string's bytes as ISO-8859-1 characters, one per byte; other strings as
they are. GEOMETRY has no canal-json form in TiCDC (TiDB has no such columns): a table with
one is refused, the column named.
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal

from tributary.change import SqlValue
from tributary.sinks.file.pbcodec import ColType
from tributary.sinks.lexer import Token, tokenize
from tributary.tidbcodec.enumset import enum_index, set_mask

# java.sql.Types
BIT, TINYINT, SMALLINT, INTEGER, BIGINT = -7, -6, 5, 4, -5
REAL, DOUBLE, DECIMAL, CHAR, VARCHAR = 7, 8, 3, 1, 12
DATE, TIME, TIMESTAMP, BLOB, CLOB = 91, 92, 93, 2004, 2005

JAVA_TYPES = {
    "tinyint": TINYINT,
    "smallint": SMALLINT,
    "mediumint": INTEGER,
    "int": INTEGER,
    "bigint": BIGINT,
    "float": REAL,
    "double": DOUBLE,
    "decimal": DECIMAL,
    "date": DATE,
    "datetime": TIMESTAMP,
    "timestamp": TIMESTAMP,
    "time": TIME,
    "year": VARCHAR,
    "char": CHAR,
    "varchar": VARCHAR,
    "binary": BLOB,
    "varbinary": BLOB,
    "tinytext": CLOB,
    "text": CLOB,
    "mediumtext": CLOB,
    "longtext": CLOB,
    "tinyblob": BLOB,
    "blob": BLOB,
    "mediumblob": BLOB,
    "longblob": BLOB,
    "enum": INTEGER,
    "set": BIT,
    "bit": BIT,
    "json": VARCHAR,
}
# unsigned integer types that widen past their signed maximum (MEDIUMINT does not, in TiCDC)
_WIDEN = {
    "tinyint": (127, SMALLINT),
    "smallint": (32767, INTEGER),
    "int": (2147483647, BIGINT),
    "bigint": ((1 << 63) - 1, DECIMAL),
}
BINARY_NAMES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
REFUSED = frozenset({"geometry"})


def sql_type(ct: ColType, name: str, value: SqlValue) -> int:
    """The java.sql.Types code of a column for ``value``."""
    code = JAVA_TYPES.get(name, VARCHAR)
    widen = _WIDEN.get(name)
    if widen is not None and ct.unsigned and isinstance(value, int) and value > widen[0]:
        return widen[1]
    return code


def _words(declared: str) -> list[str]:
    """The declared type's words outside parentheses, lowercased."""
    depth, out = 0, []
    for t in tokenize(declared):
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        elif depth == 0 and t.kind == "word":
            out.append(t.text.lower())
    return out


def mysql_type(ct: ColType, name: str, declared: str, *, full: bool) -> str:
    """``mysqlType`` of a column: TiCDC's default bare form, or the full one (``full``)."""
    words = _words(declared)
    zerofill = "zerofill" in words
    text = name + (_params(ct, name, declared) if full else "")
    if (ct.unsigned or zerofill) and name not in ("bit", "year"):
        text += " unsigned"
    if zerofill and name != "year":
        text += " zerofill"
    return text


_DEFAULT_WIDTH = {  # MySQL's display width when none is declared: (signed, unsigned)
    "tinyint": (4, 3),
    "smallint": (6, 5),
    "mediumint": (9, 8),
    "int": (11, 10),
    "bigint": (20, 20),
}
_PARAMS = re.compile(r"^\s*[A-Za-z]+(?:\s+varying)?\s*(\([^)]*\))", re.I)


def _params(ct: ColType, name: str, declared: str) -> str:
    """The parenthesized part of TiDB's ``CompactStr`` for the column."""
    if name in ("enum", "set"):
        quoted = ("'" + e.replace("\\", "\\\\").replace("'", "''") + "'" for e in ct.elems)
        return "(" + ",".join(quoted) + ")"
    m = _PARAMS.match(declared)
    given = re.sub(r"\s+", "", m.group(1)) if m else ""
    if name in _DEFAULT_WIDTH:
        return given or f"({_DEFAULT_WIDTH[name][ct.unsigned]})"
    if name == "year":
        return "(4)"
    if name in ("bit", "char", "binary"):
        return given or "(1)"
    if name == "decimal":
        if not given:
            return "(10,0)"
        return given if "," in given else given[:-1] + ",0)"
    if name in ("datetime", "timestamp", "time"):
        return "" if given in ("", "(0)") else given
    if name in ("float", "double"):
        return given if "," in given else ""
    if name in ("varchar", "varbinary"):
        return given
    return ""


_F32 = struct.Struct("<f")


def _float32(x: float) -> float:
    return float(_F32.unpack(_F32.pack(x))[0])


def _shortest32(x: float) -> str:
    """The fewest significant digits that read back to the float32 nearest ``x``."""
    v = _float32(x)
    for digits in range(1, 10):
        text = f"{v:.{digits}g}"
        try:
            if _float32(float(text)) == v:
                return text
        except OverflowError:  # rounded up past float32's largest
            continue
    return repr(v)


def go_float(x: float, bits: int) -> str:
    """Go's ``strconv.FormatFloat(x, 'f', -1, bits)``; NaN and infinities as 0, as TiCDC."""
    if math.isnan(x) or math.isinf(x):
        x = 0.0
    digits = repr(x) if bits == 64 else _shortest32(x)
    return format(Decimal(digits).normalize(), "f")


def value_text(ct: ColType, name: str, value: SqlValue) -> str | None:
    """A value as TiCDC's canal-json writes it."""
    if value is None:
        return None
    if name == "enum" and not isinstance(value, int):
        value = enum_index(ct.elems, value.decode() if isinstance(value, bytes) else str(value))
    elif name == "set" and not isinstance(value, int):
        value = set_mask(ct.elems, value.decode() if isinstance(value, bytes) else str(value))
    elif name == "bit" and isinstance(value, bytes):
        value = int.from_bytes(value, "big")
    if isinstance(value, bytes):
        return value.decode("latin-1") if name in BINARY_NAMES else value.decode("utf-8", "replace")
    if isinstance(value, float):
        return go_float(value, 32 if name == "float" else 64)
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


# -- DDL ----------------------------------------------------------------------------------------
#
# TiCDC names a DDL's ``type`` from TiDB's job type (``convertDdlEventType``); we see the query,
# so the query's statement and, for ALTER TABLE, its one change decide: CREATE TABLE -> CREATE,
# DROP TABLE -> ERASE, TRUNCATE -> TRUNCATE, RENAME TABLE and ALTER TABLE t RENAME TO -> RENAME,
# CREATE INDEX and ALTER TABLE t ADD INDEX/KEY/UNIQUE/PRIMARY KEY/FOREIGN KEY -> CINDEX, DROP
# INDEX and ALTER TABLE t DROP INDEX/KEY/PRIMARY KEY/FOREIGN KEY -> DINDEX, other ALTER TABLEs
# (several changes at once too: TiDB's multi-schema change) -> ALTER; CHECK constraints,
# databases, views and everything else -> QUERY.

_INDEX_WORDS = frozenset({"INDEX", "KEY", "UNIQUE", "PRIMARY", "FOREIGN", "FULLTEXT", "SPATIAL"})


def _upper(tokens: list[Token]) -> list[str]:
    return [t.text.upper() if t.kind == "word" else t.text for t in tokens]


def _alter_specs(words: list[str], start: int) -> list[list[str]]:
    """The comma-separated changes of an ALTER TABLE, after its table name."""
    i = start
    if words[i : i + 2] == ["IF", "EXISTS"]:
        i += 2
    i += 3 if words[i + 1 : i + 2] == ["."] else 1
    specs: list[list[str]] = [[]]
    depth = 0
    for w in words[i:]:
        depth += (w == "(") - (w == ")")
        if w == "," and depth == 0:
            specs.append([])
        elif w != ";":
            specs[-1].append(w)
    return [s for s in specs if s]


def _alter_kind(spec: list[str]) -> str:
    head, rest = spec[0], spec[1:]
    if head == "ADD":
        if rest[:1] == ["CONSTRAINT"]:
            rest = rest[1:] if rest[1:2] and rest[1] in _INDEX_WORDS | {"CHECK"} else rest[2:]
        if rest[:1] == ["CHECK"]:
            return "QUERY"
        return "CINDEX" if rest[:1] and rest[0] in _INDEX_WORDS else "ALTER"
    if head == "DROP":
        if rest[:1] and rest[0] in ("INDEX", "KEY", "PRIMARY", "FOREIGN"):
            return "DINDEX"
        return "QUERY" if rest[:1] and rest[0] in ("CHECK", "CONSTRAINT") else "ALTER"
    if head == "RENAME":
        return "ALTER" if rest[:1] and rest[0] in ("COLUMN", "INDEX", "KEY") else "RENAME"
    return "ALTER"


def ddl_type(query: str) -> str:
    """Canal's event type of a DDL, from its query (the rules above)."""
    words = _upper(tokenize(query))
    i = 1
    if words[:1] == ["CREATE"] and words[1:3] == ["OR", "REPLACE"]:
        i = 3
    head, rest = words[:1], words[i:]
    if rest[:1] == ["TEMPORARY"]:
        rest = rest[1:]
    if head == ["CREATE"] and rest[:1] == ["TABLE"]:
        return "CREATE"
    if head == ["CREATE"] and (rest[:1] == ["INDEX"] or rest[1:2] == ["INDEX"]):
        return "CINDEX"
    if head == ["DROP"] and rest[:1] == ["TABLE"]:
        return "ERASE"
    if head == ["DROP"] and rest[:1] == ["INDEX"]:
        return "DINDEX"
    if head == ["TRUNCATE"]:
        return "TRUNCATE"
    if head == ["RENAME"] and rest[:1] in (["TABLE"], ["TABLES"]):
        return "RENAME"
    if head == ["ALTER"]:
        while rest[:1] in (["ONLINE"], ["IGNORE"]):
            rest = rest[1:]
        if rest[:1] == ["TABLE"] and len(rest) > 1:
            specs = _alter_specs(words, len(words) - len(rest) + 1)
            return _alter_kind(specs[0]) if len(specs) == 1 else "ALTER"
    return "QUERY"
