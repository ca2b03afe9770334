"""The pump client library: every binlog writer's way into the pump cluster.

``PumpsClient`` watches the pump records, picks a pump per P-binlog (range or
hash), sends each C-binlog to the pump of its P-binlog, retries, takes failing
pumps out of rotation and probes them back in, and coalesces concurrent writes
into batched RPCs (falling back to tipb's unary ``WriteBinlog`` for pumps
without the batch service).
"""

from tributary.pumpclient.client import PumpsClient
from tributary.pumpclient.errors import PumpClientError
from tributary.pumpclient.source import KvPumpSource, PumpChange, PumpSource, PumpSourceError
from tributary.pumpclient.stats import ClientStats

__all__ = [
    "ClientStats",
    "KvPumpSource",
    "PumpChange",
    "PumpClientError",
    "PumpSource",
    "PumpSourceError",
    "PumpsClient",
]
