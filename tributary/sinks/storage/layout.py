"""Where the storage sink puts each file: TiCDC's layout, names and index files (pure).

Under the sink's root, with TiCDC's names (``pkg/sink/cloudstorage/path.go``)::

    metadata                                                {"checkpoint-ts":N}
    <schema>/meta/schema_<version>_<checksum>.json          a database's DDL
    <schema>/<table>/meta/schema_<version>_<checksum>.json  a table version's definition
    <schema>/<table>/<version>/[<date>/]CDC<n>.<csv|json>   its rows, n from 1
    <schema>/<table>/<version>/[<date>/]meta/CDC.index      the last file name used there

``<checksum>`` is the table definition's CRC-32 written in 10 digits (``tabledef``); ``<n>``
is zero-padded to ``file-index-width`` digits (TiCDC's default 20: ``CDC00000000000000000001``;
TiCDC's documents show 6, ``CDC000001.csv``); ``<date>`` is the day (``2026-05-04``), month
(``2026-05``) or year (``2026``) of the local time the file was written, as TiCDC's
``GenerateDateStr``, or nothing with ``date-separator=none``. A new date directory starts again
at 1, with its own index file. Files being written live under ``.tmp/`` at the root until they
are complete (``files``); TiCDC's readers skip names that end neither in the extension nor in
``schema_*.json``, and so do ours.

Example: ``shop.items`` at version 449000000000000000, day separator, 6 digits: rows in
``shop/items/449000000000000000/2026-05-04/CDC000001.csv``, that directory's
``meta/CDC.index`` reads ``CDC000001.csv\\n``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from tributary.sinks.port import SinkError

METADATA = "metadata"
INDEX_FILE = "meta/CDC.index"
TMP_DIR = ".tmp"

_SCHEMA_FILE = re.compile(r"^schema_(\d+)_(\d{10})\.json$")
_DATA_FILE = re.compile(r"^CDC(\d+)(\.\w+)$")
_DATE_FORMATS = {"none": "", "year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d"}
_DATE_PATTERNS = {
    "none": None,
    "year": re.compile(r"^\d{4}$"),
    "month": re.compile(r"^\d{4}-\d{2}$"),
    "day": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
}


class LayoutError(SinkError, ValueError):
    """A name that cannot be a directory of the layout, or a path that is not one of its files."""


def check_name(name: str, what: str) -> str:
    """``name`` as a path component; LayoutError for names a directory cannot carry."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise LayoutError(f"{what} {name!r} cannot be a directory name of the storage sink")
    return name


def date_text(separator: str, now: dt.datetime) -> str:
    """The date directory of a file written at ``now`` ("" for ``none``)."""
    return now.strftime(_DATE_FORMATS[separator]) if _DATE_FORMATS[separator] else ""


def data_dir(schema: str, table: str, version: int, date: str) -> PurePosixPath:
    path = PurePosixPath(check_name(schema, "schema"), check_name(table, "table"), str(version))
    return path / date if date else path


def data_file_name(index: int, extension: str, width: int) -> str:
    """``CDC000005.csv`` for (5, ".csv", 6)."""
    return f"CDC{index:0{width}d}{extension}"


def parse_data_file_name(name: str, extension: str) -> int | None:
    """The number of a data file name with ``extension``; None for any other name."""
    m = _DATA_FILE.match(name)
    if m is None or m.group(2) != extension:
        return None
    return int(m.group(1))


def schema_file(schema: str, table: str, version: int, checksum: int) -> PurePosixPath:
    """A table's (or, with ``table`` "", a database's) schema file."""
    name = f"schema_{version}_{checksum:010d}.json"
    base = PurePosixPath(check_name(schema, "schema"))
    return (base / check_name(table, "table") if table else base) / "meta" / name


def parse_schema_file_name(name: str) -> tuple[int, int] | None:
    """(version, checksum) of ``schema_<version>_<checksum>.json``; None for other names."""
    m = _SCHEMA_FILE.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def metadata_json(checkpoint_ts: int) -> bytes:
    """The ``metadata`` file, as TiCDC's ``json.Marshal`` writes it."""
    return b'{"checkpoint-ts":%d}' % checkpoint_ts


@dataclass(frozen=True, slots=True, order=True)
class DataPath:
    """A data file's place: the order a consumer reads a table's files in is this order."""

    schema: str
    table: str
    version: int
    date: str
    index: int

    @classmethod
    def parse(cls, relative: str, separator: str, extension: str) -> DataPath | None:
        """The place of ``<schema>/<table>/<version>/[<date>/]CDC<n><extension>``; None for
        any other path (schema files, index files, metadata, temporary files)."""
        parts = relative.split("/")
        dated = _DATE_PATTERNS[separator] is not None
        if len(parts) != (5 if dated else 4) or not parts[2].isdigit():
            return None
        index = parse_data_file_name(parts[-1], extension)
        if index is None:
            return None
        pattern = _DATE_PATTERNS[separator]
        date = parts[3] if dated else ""
        if pattern is not None and not pattern.match(date):
            return None
        return cls(parts[0], parts[1], int(parts[2]), date, index)
