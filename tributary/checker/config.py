"""Settings of ``tributary-check``: flags, ``TRIBUTARY_CHECK_*`` environment variables and an
optional ``--config`` TOML file, through the shared settings loader."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tributary.settings import INT, STR_LIST, LogSettings, ProgressSettings, group, setting

_HELP = """\
Compare the tables of an upstream and a downstream database and list the rows that differ.

URLs: mysql://user:password@host:port[/database][?time-zone=+00:00] (MySQL, MariaDB, TiDB)
and sqlite://PATH (the SQLite sink's file; upstream table db.t is its table db__t).
Exit codes: 0 equal, 1 differences found, 2 bad usage or a database error.
Compare at rest: on a live replica rows not yet replicated show up as differences."""


@dataclass(frozen=True)
class CheckConfig:
    __doc__ = _HELP

    upstream: str = setting("", "upstream database URL", flag=("-u", "--upstream"))
    downstream: str = setting("", "downstream database URL", flag=("-d", "--downstream"))
    tables: tuple[str, ...] = setting(
        (), "tables to compare, comma separated: db.table, db.* or ~regex (default all)",
        kind=STR_LIST,
    )  # fmt: skip
    exclude: tuple[str, ...] = setting(
        (), "tables to leave out, same patterns as --tables", kind=STR_LIST
    )
    chunk_size: int = setting(1000, "rows per checksummed chunk", kind=INT)
    max_diffs: int = setting(100, "row differences listed per table (all are counted)", kind=INT)
    as_json: bool = setting(False, "print the report as JSON", toml="json", flag="--json")
    progress: ProgressSettings = group(ProgressSettings, "progress", inline=True)
    log: LogSettings = group(LogSettings, "logging", inline=True, default=LogSettings(level="warn"))

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.upstream:
            yield "upstream", "required: the upstream database URL"
        if not self.downstream:
            yield "downstream", "required: the downstream database URL"
        if self.chunk_size < 1:
            yield "chunk-size", "must be at least 1"
        if self.max_diffs < 0:
            yield "max-diffs", "must not be negative"
        if self.progress.interval <= 0:
            yield "progress-interval", "must be positive"
