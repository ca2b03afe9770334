"""``[syncer.to.checkpoint]``: where tidb-binlog's drainer keeps its checkpoint, read so that this
drainer finds the same row.

tidb-binlog's drainer (``drainer/util.go GenCheckPointCfg``) keeps a MySQL/TiDB downstream's
checkpoint in ``<schema>.<table>`` (``tidb_binlog.checkpoint``): ``schema`` counts whatever the
``type``, ``table`` only with ``type = "mysql"|"tidb"``, and that ``type`` makes it connect to the
checkpoint's own ``host``/``port`` (default 127.0.0.1:3306) instead of the downstream. This
drainer commits its checkpoint with the rows, so the row has to be in the downstream itself:
``schema`` and ``table`` become the MySQL sink's ``checkpoint-schema``/``checkpoint-table``, and
a checkpoint elsewhere (another server, Oracle, a MySQL checkpoint for a file or Kafka output) is
refused rather than ignored: ignoring it would start the drainer without its checkpoint, at
``initial-commit-ts``, and skip or repeat binlogs. ``user``, ``password`` and
``encrypted_password`` are accepted and not used (the downstream's user writes the row).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

from tributary.settings import choice, setting

SQL_TYPES = ("mysql", "tidb")
GO_DEFAULT_HOST = "127.0.0.1"  # tidb-binlog's checkpoint defaults (checkpoint/util.go)
GO_DEFAULT_PORT = 3306
MIGRATION_DOC = "docs/migrate-from-tidb-binlog.md"


@dataclass(frozen=True)
class CheckpointToConfig:
    """``[syncer.to.checkpoint]``: tidb-binlog's checkpoint location keys."""

    type: str = setting(
        "",
        "'' (the downstream for mysql/tidb, data-dir otherwise) or mysql/tidb (the server of "
        "host/port, which must be the downstream's); oracle is refused",
        kind=choice("", "mysql", "tidb", "oracle"),
    )
    schema: str = setting("", "schema of the checkpoint table (default tidb_binlog)")
    table: str = setting("", "checkpoint table, only with type mysql/tidb (default checkpoint)")
    host: str = setting("", "with type mysql/tidb: the checkpoint's server (default 127.0.0.1)")
    port: int = setting(0, "with type mysql/tidb: its port (default 3306)")
    user: str = setting("", "accepted, not used: the downstream's user writes the checkpoint")
    password: str = setting("", "accepted, not used", secret=True)
    encrypted_password: str = setting(
        "", "accepted, not used", toml="encrypted_password", secret=True
    )

    def url_options(self) -> str:
        """``&checkpoint-schema=...&checkpoint-table=...`` for the MySQL sink URL, as set."""
        out = ""
        if self.schema:
            out += f"&checkpoint-schema={quote(self.schema, safe='')}"
        if self.table and self.type in SQL_TYPES:
            out += f"&checkpoint-table={quote(self.table, safe='')}"
        return out

    def problems(
        self, db_type: str, sink_uri: str, to_host: str, to_port: int
    ) -> Iterator[tuple[str, str]]:
        """Why this drainer would not find the row tidb-binlog's drainer keeps (keys relative
        to ``[syncer]``)."""
        if self.type == "oracle":
            yield "to.checkpoint.type", "no Oracle downstream or checkpoint here"
            return
        if sink_uri and (self.type or self.schema or self.table):
            yield (
                "to.checkpoint",
                "sink-uri replaces [syncer.to]: name the checkpoint table in it "
                "(mysql://...?checkpoint-schema=S&checkpoint-table=T)",
            )
            return
        if self.type not in SQL_TYPES:
            return
        if db_type not in SQL_TYPES:
            yield (
                "to.checkpoint.type",
                f"a {self.type} checkpoint for db-type {db_type} is not supported: this drainer "
                f"keeps it in data-dir (write its commitTS into <data-dir>/savepoint, "
                f"{MIGRATION_DOC})",
            )
            return
        where = (self.host or GO_DEFAULT_HOST, self.port or GO_DEFAULT_PORT)
        if where != (to_host, to_port):
            yield (
                "to.checkpoint.host",
                f"the checkpoint at {where[0]}:{where[1]} is not in the downstream "
                f"({to_host}:{to_port}); this drainer commits it with the rows: copy its row "
                f"into the downstream ({MIGRATION_DOC})",
            )
