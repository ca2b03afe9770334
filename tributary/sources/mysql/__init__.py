"""The MySQL/MariaDB change source: the row binlog read as whole transactions.

``open_source(cfg, start, last_ts)`` -> async iterator of ``SourceTxn(txn, position)``;
``current_position(cfg)``; ``list_tables(cfg)``; ``Position`` tokens ``file:pos[@gtid]``;
``SourceConfig``; ``SourceError`` (``retriable``). See docs/mysqlsource.md.
"""

from tributary.sources.mysql.assemble import SourceTxn
from tributary.sources.mysql.config import SourceConfig
from tributary.sources.mysql.errors import SourceError
from tributary.sources.mysql.position import Position
from tributary.sources.mysql.source import current_position, list_tables, open_source

__all__ = [
    "Position",
    "SourceConfig",
    "SourceError",
    "SourceTxn",
    "current_position",
    "list_tables",
    "open_source",
]
