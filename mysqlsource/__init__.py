"""The MySQL/MariaDB change source: the row binlog read as whole transactions.

``open_source(cfg, start, last_ts)`` -> async iterator of ``SourceTxn(txn, position)``;
``current_position(cfg)``; ``Position`` tokens ``file:pos[@gtid]``; ``SourceConfig``;
``SourceError`` (``retriable``). See docs/mysqlsource.md.
"""

from mysqlsource.assemble import SourceTxn
from mysqlsource.config import SourceConfig
from mysqlsource.errors import SourceError
from mysqlsource.position import Position
from mysqlsource.source import current_position, open_source

__all__ = [
    "Position",
    "SourceConfig",
    "SourceError",
    "SourceTxn",
    "current_position",
    "open_source",
]
