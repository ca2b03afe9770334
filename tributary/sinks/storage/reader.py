"""Reading a storage sink's files back, by TiCDC's layout: what a consumer needs.

Every function reads through a ``store.Store`` (a directory or an S3 bucket prefix:
``store.open_store(settings)``). ``scan`` lists the schema files (table versions, DDLs) and the data
files under the root, each data file with its place (``layout.DataPath``, whose order is the order
to read a table's files in); ``checkpoint`` reads ``metadata``; ``read_rows`` decodes a data file
into (commit ts, row change) pairs with the table version's definition. Nothing here writes.

What a consumer must do with them (``tests/support/storage_consumer.py`` does it): read
``metadata`` first, then scan; every file holding a row at or below that checkpoint is then in
the scan, and so is every file before it in its table's order (they were written earlier). Per
table, read files in order, and drop a row whose commit ts is at or below the highest one read
from the table's earlier files (a replay after a crash). Apply, in commit ts order, the rows
and DDLs (schema files with a query, at their version) at or below the checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from tributary.change import RowChange
from tributary.sinks.kafka.canal import decode
from tributary.sinks.storage import csvcodec, tabledef
from tributary.sinks.storage.layout import METADATA, DataPath, parse_schema_file_name
from tributary.sinks.storage.settings import StorageSettings
from tributary.sinks.storage.store import Store


@dataclass(frozen=True, slots=True)
class SchemaFile:
    relative: str
    definition: tabledef.TableDefinition

    @property
    def version(self) -> int:
        return self.definition.table_version


@dataclass(frozen=True, slots=True)
class Scan:
    schemas: dict[tuple[str, str, int], SchemaFile]  # (schema, table "" for a database, version)
    data: list[tuple[DataPath, str]]  # (place, relative path), in reading order


def checkpoint(store: Store) -> int | None:
    """The checkpoint ``metadata`` holds; None before the sink wrote one."""
    data = store.read(PurePosixPath(METADATA))
    return None if data is None else int(json.loads(data)["checkpoint-ts"])


def scan(store: Store, settings: StorageSettings) -> Scan:
    schemas: dict[tuple[str, str, int], SchemaFile] = {}
    data: list[tuple[DataPath, str]] = []
    for relative in store.walk():
        rel_dir, _, name = relative.rpartition("/")
        if parse_schema_file_name(name) is not None and rel_dir.endswith("meta"):
            content = store.read(PurePosixPath(relative))
            if content is None:
                continue  # gone since the listing (nothing removes schema files: not ours)
            definition = tabledef.parse(content)
            key = (definition.schema, definition.table, definition.table_version)
            schemas[key] = SchemaFile(relative, definition)
            continue
        place = DataPath.parse(relative, settings.date_separator, settings.extension)
        if place is not None:
            data.append((place, relative))
    data.sort()
    return Scan(schemas, data)


def read_rows(
    store: Store, relative: str, definition: tabledef.TableDefinition, settings: StorageSettings
) -> Iterator[tuple[int, RowChange]]:
    """A data file's rows with their commit ts: a CSV ``U`` is the new row as an INSERT (the
    file has no old row; applied as REPLACE it is the update), ``D`` a DELETE."""
    data = store.read(PurePosixPath(relative))
    if data is None:
        raise FileNotFoundError(f"{store.location}: {relative} is gone")
    text = data.decode()
    if settings.protocol == "canal-json":
        for line in text.split(settings.terminator):
            if line:
                event = decode(line.encode())
                if event.row is not None:
                    yield event.commit_ts, event.row
        return
    info = definition.table_info()
    cols = definition.columns or ()
    for record in csvcodec.parse(text, settings.csv, settings.terminator):
        if len(record.values) != len(cols):
            raise csvcodec.CsvDecodeError(
                f"{relative}: a record has {len(record.values)} values, the table {len(cols)}"
            )
        enc = settings.csv.binary_encoding
        values = {
            c.name: csvcodec.value_of(v, c, enc) for c, v in zip(cols, record.values, strict=True)
        }
        if record.op == "D":
            yield record.commit_ts, RowChange.delete(info, values)
        else:
            yield record.commit_ts, RowChange.insert(info, values)
