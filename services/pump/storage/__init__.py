"""The pump's durable binlog storage: value log, SQLite index, P/C sorter, GC.

Open it with ``async with Storage.open(data_dir, settings, resolver) as storage``.
"""

from services.pump.storage.errors import StorageClosed, StorageError, StorageFull
from services.pump.storage.reader import PulledBinlog
from services.pump.storage.resolver import (
    Outcome,
    Resolution,
    Resolver,
    RollbackResolver,
    WaitResolver,
)
from services.pump.storage.settings import StorageSettings, available_space
from services.pump.storage.stats import Distribution, StorageStats
from services.pump.storage.storage import Storage, wall_clock_ts
from services.pump.storage.writer import WriteItem

__all__ = [
    "Distribution",
    "Outcome",
    "PulledBinlog",
    "Resolution",
    "Resolver",
    "RollbackResolver",
    "Storage",
    "StorageClosed",
    "StorageError",
    "StorageFull",
    "StorageSettings",
    "StorageStats",
    "WaitResolver",
    "WriteItem",
    "available_space",
    "wall_clock_ts",
]
