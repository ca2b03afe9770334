"""Fuzz targets for configuration: the services' TOML files and a changefeed's replica config.

``pump.toml``, ``drainer.toml``, ``arbiter.toml`` (and the capture's server config) go through
``settings.from_toml``, what ``--config FILE`` does; a changefeed's config (TOML given to
``binlog-cdc cli --config``, JSON in the HTTP API) through ``ReplicaConfig.from_dict(strict)``
and the capture's own check (``check_config``: table rules, event filters and their value
expressions), and the expressions are then evaluated on rows of every kind.
"""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path

from services.arbiter.config import ArbiterConfig
from services.capture.config import CaptureConfig
from services.capture.eventfilter import EventFilter
from services.capture.feeds import check_config
from tributary.cdc.model import ReplicaConfig
from tributary.change import ColumnInfo, Ddl, RowChange, RowKind, TableInfo, Txn
from tributary.config.drainer import DrainerConfig
from tributary.config.pump import PumpConfig

_DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "tidb-binlog-v8.1.2"


def _stock(name: str) -> list[bytes]:
    path = _DATA / name
    return [path.read_bytes()] if path.is_file() else []


PUMP_SEEDS = [
    *_stock("pump.toml"),
    b'addr = "127.0.0.1:8250"\ndata-dir = "data.pump"\ngc = 7\n[storage]\nstop-write-at-available'
    b'-space = "10 GiB"\nsync-log = true\n[security]\nssl-ca = ""\n',
]
DRAINER_SEEDS = [
    *_stock("drainer.toml"),
    b'addr = "127.0.0.1:8249"\ninitial-commit-ts = -1\n[syncer]\ndb-type = "file"\nworker-count'
    b' = 16\nreplicate-do-db = ["shop"]\n[[syncer.replicate-do-table]]\ndb-name = "a"\ntbl-name'
    b' = "b"\n[syncer.to]\ndir = "/tmp/x"\n',
]
ARBITER_SEEDS = [
    b'addr = "127.0.0.1:8251"\nlog-level = "info"\n[up]\nkafka-addrs = "127.0.0.1:9092"\n'
    b'kafka-version = "2.8.0"\ntopic = "binlog"\n[down]\ndb-type = "mysql"\nhost = "127.0.0.1"\n'
    b'port = 3306\nuser = "root"\npassword = ""\nworker-count = 16\nbatch-size = 64\n',
]
CAPTURE_SEEDS = [
    b'addr = "127.0.0.1:8300"\ncluster-id = "default"\nupstream = "mysql://root@127.0.0.1:3306/"\n',
]

SETTINGS = {
    "toml_pump": (PumpConfig, PUMP_SEEDS),
    "toml_drainer": (DrainerConfig, DRAINER_SEEDS),
    "toml_arbiter": (ArbiterConfig, ARBITER_SEEDS),
    "toml_capture": (CaptureConfig, CAPTURE_SEEDS),
}

_T = TableInfo(
    "shop",
    "orders",
    (
        ColumnInfo("id", "bigint", is_pk=True),
        ColumnInfo("price", "decimal(10,2)"),
        ColumnInfo("state", "varchar(16)"),
        ColumnInfo("note", "blob"),
        ColumnInfo("at", "datetime"),
    ),
    primary_key=("id",),
)
_OLD = {"id": 7, "price": Decimal("12.50"), "state": "draft", "note": b"\x00\xff", "at": None}
_NEW = {"id": 7, "price": Decimal("1500"), "state": "paid", "note": None, "at": "2024-01-02"}
_TXNS = (
    Txn(
        5,
        4,
        rows=(
            RowChange(RowKind.INSERT, _T, _NEW),
            RowChange(RowKind.UPDATE, _T, _NEW, _OLD),
            RowChange(RowKind.DELETE, _T, _OLD),
        ),
    ),
    Txn(6, 5, ddl=Ddl("shop", "ALTER TABLE orders ADD COLUMN x int, DROP INDEX k", "orders")),
)


def _check_and_apply(config: ReplicaConfig) -> None:
    check_config(config)
    event_filter = EventFilter(config.event_filters)
    for txn in _TXNS:
        event_filter.apply(txn)


def changefeed_toml(raw: bytes) -> None:
    """What ``binlog-cdc cli changefeed create --config FILE`` and the capture make of a file
    (the CLI reports a file that is not UTF-8 TOML before sending it)."""
    try:
        doc = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return
    _check_and_apply(ReplicaConfig.from_dict(doc, strict=True))


def changefeed_json(raw: bytes) -> None:
    """The ``replica_config`` of an HTTP create/update body (not JSON: the API's 400 first)."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return
    _check_and_apply(ReplicaConfig.from_dict(doc, strict=True))


def value_expr(raw: bytes) -> None:
    """One event-filter value expression, as every ``ignore-*-value-expr`` key, on every row."""
    text = raw.decode("utf-8", "replace")
    rule = {
        "matcher": ["shop.*"],
        "ignore-insert-value-expr": text,
        "ignore-update-new-value-expr": text,
        "ignore-update-old-value-expr": text,
        "ignore-delete-value-expr": text,
    }
    config = ReplicaConfig.from_dict({"filter": {"event-filters": [rule]}}, strict=True)
    _check_and_apply(config)


CHANGEFEED_SEEDS = [
    b"case-sensitive = false\nmemory-quota = 1073741824\n[filter]\nrules = ['*.*', '!test.*']\n"
    b"ignore-txn-start-ts = [441234567890123456]\n[[filter.event-filters]]\nmatcher = "
    b"['shop.orders']\nignore-event = ['delete', 'truncate table']\nignore-sql = ['^drop', "
    b"'add column']\nignore-insert-value-expr = \"price > 1000\"\nignore-update-new-value-expr ="
    b" \"state = 'cancelled'\"\nignore-update-old-value-expr = \"state = 'draft'\"\n"
    b'ignore-delete-value-expr = "id < 10"\n[synced-status]\nsynced-check-interval = 300\n'
    b"checkpoint-interval = 15\n",
]
JSON_SEEDS = [
    b'{"case-sensitive": true, "filter": {"rules": ["a.*"]}}',
    json.dumps(
        {
            "filter": {
                "rules": ["shop.*", "!shop.tmp_*"],
                "event-filters": [
                    {
                        "matcher": ["shop.orders"],
                        "ignore-event": ["all ddl", "update"],
                        "ignore-sql": ["^alter"],
                        "ignore-insert-value-expr": "price between 1 and 10 or note is null",
                        "ignore-delete-value-expr": "state not in ('a', 'b')",
                    }
                ],
            },
            "synced-status": {"checkpoint-interval": 5},
        }
    ).encode(),
]
EXPR_SEEDS = [
    b"price > 1000 and state in ('new', 'paid')",
    b"not (id between 1 and 10) or `note` is not null",
    b"state like 'dr%' and price * 2 - id / 3 >= -1.5",
    b"at = \"2024-01-02\" or state <> 'x' or price != 0 and TRUE",
]
