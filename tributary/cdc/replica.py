"""A changefeed's replica config: the part of TiCDC's that this cluster honours, by TiCDC's keys.

Accepted (``from_dict``, TOML or JSON, dashed or underscored keys):

    case-sensitive = false
    memory-quota = 1073741824          # bytes of rows a processor reads ahead of its sink
    enable-sync-point = false          # sync points into a SQL downstream (``cdc.syncpoint``)
    sync-point-interval = "10m"        # Go duration text, or nanoseconds (TiCDC's JSON)
    sync-point-retention = "24h"
    [filter]
    rules = ['*.*', '!test.*']
    ignore-txn-start-ts = [441234567890123456]
    [[filter.event-filters]]
    matcher = ['shop.orders']
    ignore-event = ['delete', 'truncate table']
    ignore-sql = ['^drop', 'add column']
    ignore-insert-value-expr = "price > 1000"
    ignore-update-new-value-expr = "state = 'cancelled'"
    ignore-update-old-value-expr = "state = 'draft'"
    ignore-delete-value-expr = "id < 10"
    [synced-status]
    synced-check-interval = 300        # seconds (the /synced API)
    checkpoint-interval = 15

A user's config (``strict``) is refused when it names anything else: TiCDC's keys this cluster
cannot honour get the reason (``UNSUPPORTED``), other keys are named as unknown. Event filter
contents (event names, regexes, expressions) are checked where they are compiled
(``services.capture.eventfilter``). Records read back from etcd are not strict.

Invariant: ``ReplicaConfig.from_dict(c.to_dict()) == c``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tributary.cdc.errors import BadRecord
from tributary.cdc.syncpoint import (
    DEFAULT_INTERVAL_NS,
    DEFAULT_RETENTION_NS,
    check_settings,
    parse_duration_ns,
)

DEFAULT_MEMORY_QUOTA = 1 << 30  # TiCDC's DefaultChangefeedMemoryQuota

# TiCDC's replica-config keys that mean nothing for a MySQL/MariaDB binlog reader, and why.
UNSUPPORTED: Mapping[str, str] = {
    "mounter": "rows are decoded by the changefeed's one binlog reader; there are no mounter "
    "workers to size",
    "force-replicate": "tables without a primary or unique key replicate anyway here",
    "check-gc-safe-point": "there is no GC safepoint: the upstream keeps binlog files by its own "
    "expire_logs_days / binlog_expire_logs_seconds",
    "bdr-mode": "bidirectional replication is not supported",
    "scheduler": "a changefeed runs on one capture; its tables are not split across captures",
    "consistent": "there is no redo log; the MySQL sink keeps its checkpoint in the same "
    "downstream transaction as the rows instead",
    "integrity": "row checksums are TiDB's; a MySQL/MariaDB binlog carries none",
    "sink": "sink options go in the sink URI (protocol, dispatcher, safe-mode, ...)",
    "changefeed-error-stuck-duration": "a retriable error is retried until it is fixed or the "
    "changefeed is paused",
    "enable-old-value": "old values are always kept (FULL row image)",
    "enable-table-monitor": "not applicable",
    "bdr": "bidirectional replication is not supported",
}

_FILTER_UNSUPPORTED: Mapping[str, str] = {
    "do-dbs": "use rules (TiCDC's table filter syntax)",
    "do-tables": "use rules (TiCDC's table filter syntax)",
    "ignore-dbs": "use rules with '!db.*'",
    "ignore-tables": "use rules with '!db.table'",
}

EVENT_FILTER_KEYS = (
    "matcher",
    "ignore-event",
    "ignore-sql",
    "ignore-insert-value-expr",
    "ignore-update-new-value-expr",
    "ignore-update-old-value-expr",
    "ignore-delete-value-expr",
)


def _norm(data: Mapping[str, Any]) -> dict[str, Any]:
    """Keys with dashes (TOML) whether they came dashed or underscored (the v2 API's JSON)."""
    return {str(k).replace("_", "-"): v for k, v in data.items()}


def _strings(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRecord(f"{what} must be a list of strings")
    return tuple(value)


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise BadRecord(f"{what} must be a string")
    return value


def _positive(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadRecord(f"{what} must be a positive integer")
    return value


def _refuse(data: Mapping[str, Any], where: str, known: set[str], why: Mapping[str, str]) -> None:
    reasons = [f"{where}{k}: {why[k]}" for k in data if k in why]
    unknown = sorted(f"{where}{k}" for k in data if k not in known and k not in why)
    problems = []
    if reasons:
        problems.append("not supported here: " + "; ".join(reasons))
    if unknown:
        problems.append(
            f"unknown changefeed config key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} (known: {', '.join(sorted(known))})"
        )
    if problems:
        raise BadRecord(". ".join(problems))


@dataclass(frozen=True, slots=True)
class EventFilterRule:
    """One ``[[filter.event-filters]]`` entry (TiCDC's ``EventFilterRule``)."""

    matcher: tuple[str, ...] = ()
    ignore_event: tuple[str, ...] = ()
    ignore_sql: tuple[str, ...] = ()
    ignore_insert_value_expr: str = ""
    ignore_update_new_value_expr: str = ""
    ignore_update_old_value_expr: str = ""
    ignore_delete_value_expr: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "matcher": list(self.matcher),
            "ignore-event": list(self.ignore_event),
            "ignore-sql": list(self.ignore_sql),
            "ignore-insert-value-expr": self.ignore_insert_value_expr,
            "ignore-update-new-value-expr": self.ignore_update_new_value_expr,
            "ignore-update-old-value-expr": self.ignore_update_old_value_expr,
            "ignore-delete-value-expr": self.ignore_delete_value_expr,
        }

    @classmethod
    def from_dict(cls, raw: object, where: str, *, strict: bool) -> EventFilterRule:
        if not isinstance(raw, dict):
            raise BadRecord(f"{where} must be a table")
        d = _norm(raw)
        if strict:
            _refuse(d, where + ".", set(EVENT_FILTER_KEYS), {})
        rule = cls(
            matcher=_strings(d.get("matcher", []), f"{where}.matcher"),
            ignore_event=_strings(d.get("ignore-event", []), f"{where}.ignore-event"),
            ignore_sql=_strings(d.get("ignore-sql", []), f"{where}.ignore-sql"),
            **{
                k.replace("-", "_"): _string(d.get(k) or "", f"{where}.{k}")
                for k in EVENT_FILTER_KEYS[3:]
            },
        )
        if strict and not rule.matcher:
            raise BadRecord(f"{where}.matcher is required (the tables the rule applies to)")
        return rule


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    filter_rules: tuple[str, ...] = ("*.*",)
    ignore_txn_start_ts: tuple[int, ...] = ()
    case_sensitive: bool = False
    synced_check_interval: int = 300  # [synced-status], seconds
    checkpoint_interval: int = 15
    memory_quota: int = DEFAULT_MEMORY_QUOTA
    event_filters: tuple[EventFilterRule, ...] = field(default=())
    enable_sync_point: bool = False
    sync_point_interval: int = DEFAULT_INTERVAL_NS  # nanoseconds, as TiCDC's JSON
    sync_point_retention: int = DEFAULT_RETENTION_NS

    KEYS = frozenset(
        {
            "filter",
            "case-sensitive",
            "memory-quota",
            "synced-status",
            "enable-sync-point",
            "sync-point-interval",
            "sync-point-retention",
        }
    )
    FILTER_KEYS = frozenset({"rules", "ignore-txn-start-ts", "event-filters"})

    def to_dict(self) -> dict[str, object]:
        return {
            "case-sensitive": self.case_sensitive,
            "memory-quota": self.memory_quota,
            "enable-sync-point": self.enable_sync_point,
            "sync-point-interval": self.sync_point_interval,
            "sync-point-retention": self.sync_point_retention,
            "filter": {
                "rules": list(self.filter_rules),
                "ignore-txn-start-ts": list(self.ignore_txn_start_ts),
                "event-filters": [r.to_dict() for r in self.event_filters],
            },
            "synced-status": {
                "synced-check-interval": self.synced_check_interval,
                "checkpoint-interval": self.checkpoint_interval,
            },
        }

    @classmethod
    def from_dict(cls, data: object, *, strict: bool = False) -> ReplicaConfig:
        """``strict`` (a user's request): what this capture does not apply is refused by name
        rather than ignored. Records read back from etcd are not strict: TiCDC writes keys of
        its own (sink, scheduler, ...) into the records it owns."""
        if not isinstance(data, dict):
            if strict and data is not None:
                raise BadRecord("config must be an object")
            return cls()
        d = _norm(data)
        flt = d.get("filter") or {}
        synced = d.get("synced-status") or {}
        for name, part in (("config.filter", flt), ("config.synced-status", synced)):
            if not isinstance(part, dict):
                raise BadRecord(f"{name} must be an object")
        flt, synced = _norm(flt), _norm(synced)
        if strict:
            _refuse(d, "config.", set(cls.KEYS), UNSUPPORTED)
            _refuse(flt, "config.filter.", set(cls.FILTER_KEYS), _FILTER_UNSUPPORTED)
            _refuse(
                synced,
                "config.synced-status.",
                {"synced-check-interval", "checkpoint-interval"},
                {},
            )
        ignore = flt.get("ignore-txn-start-ts", [])
        if not isinstance(ignore, list) or not all(isinstance(t, int) for t in ignore):
            raise BadRecord("config.filter.ignore-txn-start-ts must be a list of integers")
        events = flt.get("event-filters", [])
        if not isinstance(events, list):
            raise BadRecord("config.filter.event-filters must be a list of tables")
        sync = _sync_points(d, strict=strict)
        return cls(
            filter_rules=_strings(flt.get("rules", ["*.*"]), "config.filter.rules"),
            ignore_txn_start_ts=tuple(ignore),
            case_sensitive=bool(d.get("case-sensitive", False)),
            synced_check_interval=_positive(
                synced.get("synced-check-interval", 300),
                "config.synced-status.synced-check-interval",
            ),
            checkpoint_interval=_positive(
                synced.get("checkpoint-interval", 15), "config.synced-status.checkpoint-interval"
            ),
            memory_quota=_positive(
                d.get("memory-quota", DEFAULT_MEMORY_QUOTA), "config.memory-quota"
            ),
            event_filters=tuple(
                EventFilterRule.from_dict(r, f"config.filter.event-filters[{i}]", strict=strict)
                for i, r in enumerate(events)
            ),
            enable_sync_point=sync[0],
            sync_point_interval=sync[1],
            sync_point_retention=sync[2],
        )


def _sync_points(d: Mapping[str, Any], *, strict: bool) -> tuple[bool, int, int]:
    """``(enable-sync-point, sync-point-interval, sync-point-retention)``. A user's config
    (``strict``) gets TiCDC's validation (``cdc.syncpoint.check_settings``) when they are on;
    a record read back keeps what it says, a value that is no duration giving the default."""
    enabled = d.get("enable-sync-point", False)
    if not isinstance(enabled, bool):
        if strict:
            raise BadRecord("config.enable-sync-point must be true or false")
        enabled = False
    values = []
    for key, default in (
        ("sync-point-interval", DEFAULT_INTERVAL_NS),
        ("sync-point-retention", DEFAULT_RETENTION_NS),
    ):
        raw = d.get(key)
        try:
            values.append(default if raw is None else parse_duration_ns(raw, f"config.{key}"))
        except BadRecord:
            if strict:
                raise
            values.append(default)
    interval, retention = values
    if strict and enabled:
        try:
            check_settings(interval, retention)
        except BadRecord as e:
            raise BadRecord(f"config.{e}") from None
    return enabled, interval, retention
