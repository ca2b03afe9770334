"""What a comparison found: per table, its chunks and its row differences, and the verdict.

``Report.equal`` is True only when every table exists on both sides with the same columns and
no row differs. A table's ``diffs`` list is capped (``max_diffs``); the counts are not.
``to_dict`` is the ``--json`` form; ``render_text`` the human one.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tributary.checker.canon import Canon, display


class DiffKind(enum.StrEnum):
    MISSING = "missing"  # in the upstream, not in the downstream
    EXTRA = "extra"  # in the downstream, not in the upstream
    DIFFERENT = "different"  # same key, other values


class Presence(enum.StrEnum):
    BOTH = "both"
    UPSTREAM_ONLY = "upstream only"
    DOWNSTREAM_ONLY = "downstream only"


@dataclass(frozen=True, slots=True)
class RowDiff:
    """One differing row. ``key``: the key columns' values (every column for a table without a
    key); for DIFFERENT, ``columns`` names the differing columns and ``upstream``/``downstream``
    hold their values; ``count`` is how many identical copies a keyless row is off by."""

    kind: DiffKind
    key: tuple[tuple[str, Canon], ...]
    columns: tuple[str, ...] = ()
    upstream: tuple[Canon, ...] = ()
    downstream: tuple[Canon, ...] = ()
    count: int = 1

    def key_text(self) -> str:
        return ", ".join(f"{c}={_show(v)}" for c, v in self.key)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "key": _values(self.key)}
        if self.kind is DiffKind.DIFFERENT:
            out["columns"] = {
                c: {"upstream": display(u), "downstream": display(d)}
                for c, u, d in zip(self.columns, self.upstream, self.downstream, strict=True)
            }
        if self.count != 1:
            out["count"] = self.count
        return out


def _values(pairs: Sequence[tuple[str, Canon]]) -> dict[str, Any]:
    return {c: display(v) for c, v in pairs}


def _show(v: Canon) -> str:
    return "NULL" if v is None else repr(display(v)) if not isinstance(v, int) else str(v)


@dataclass
class TableReport:
    table: str  # as named upstream (downstream-only tables: the upstream name they would have)
    downstream_table: str
    presence: Presence = Presence.BOTH
    key: tuple[str, ...] = ()
    key_kind: str = ""  # "primary key", "unique key" or "all columns"
    columns_only_upstream: tuple[str, ...] = ()
    columns_only_downstream: tuple[str, ...] = ()
    checksum: str = ""  # where chunk checksums were computed: "sql" or "python"
    chunks: int = 0
    chunks_differing: int = 0
    rows_upstream: int = 0
    rows_downstream: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    diffs: list[RowDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def rows_equal(self) -> bool:
        return self.missing == self.extra == self.different == 0

    @property
    def equal(self) -> bool:
        return (
            self.presence is Presence.BOTH
            and not self.columns_only_upstream
            and not self.columns_only_downstream
            and self.rows_equal
        )

    def add(self, diff: RowDiff, max_diffs: int) -> None:
        """Count ``diff``; keep it in ``diffs`` while fewer than ``max_diffs`` are kept."""
        if diff.kind is DiffKind.MISSING:
            self.missing += diff.count
        elif diff.kind is DiffKind.EXTRA:
            self.extra += diff.count
        else:
            self.different += diff.count
        if len(self.diffs) < max_diffs:
            self.diffs.append(diff)

    def find(self, kind: DiffKind) -> list[RowDiff]:
        return [d for d in self.diffs if d.kind is kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "downstream_table": self.downstream_table,
            "presence": self.presence.value,
            "equal": self.equal,
            "key": list(self.key),
            "key_kind": self.key_kind,
            "columns_only_upstream": list(self.columns_only_upstream),
            "columns_only_downstream": list(self.columns_only_downstream),
            "checksum": self.checksum,
            "chunks": self.chunks,
            "chunks_differing": self.chunks_differing,
            "rows_upstream": self.rows_upstream,
            "rows_downstream": self.rows_downstream,
            "missing": self.missing,
            "extra": self.extra,
            "different": self.different,
            "diffs": [d.to_dict() for d in self.diffs],
            "diffs_truncated": len(self.diffs) < self.missing + self.extra + self.different,
            "notes": list(self.notes),
        }


@dataclass
class Report:
    upstream: str  # URLs without their password
    downstream: str
    tables: list[TableReport] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def table(self, name: str) -> TableReport:
        for t in self.tables:
            if t.table == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "downstream": self.downstream,
            "equal": self.equal,
            "tables_checked": len(self.tables),
            "tables_differing": sum(not t.equal for t in self.tables),
            "tables": [t.to_dict() for t in self.tables],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def render_text(self) -> str:
        lines = [f"upstream   {self.upstream}", f"downstream {self.downstream}"]
        for t in self.tables:
            lines += _table_lines(t)
        differing = sum(not t.equal for t in self.tables)
        verdict = "EQUAL" if self.equal else "DIFFERENT"
        lines.append(f"{verdict}: {len(self.tables)} tables checked, {differing} differing")
        return "\n".join(lines)


def _table_lines(t: TableReport) -> list[str]:
    if t.presence is not Presence.BOTH:
        return [f"{t.table}: only in the {t.presence.value.split()[0]}"]
    verdict = "equal" if t.equal else "DIFFERENT"
    head = (
        f"{t.table}: {verdict} ({t.chunks} chunks, {t.chunks_differing} differing; "
        f"rows {t.rows_upstream} upstream, {t.rows_downstream} downstream; {t.key_kind}"
        + (f" {', '.join(t.key)}" if t.key_kind != "all columns" else "")
        + ")"
    )
    lines = [head]
    if t.columns_only_upstream:
        lines.append(f"  columns only upstream: {', '.join(t.columns_only_upstream)}")
    if t.columns_only_downstream:
        lines.append(f"  columns only downstream: {', '.join(t.columns_only_downstream)}")
    if not t.rows_equal:
        lines.append(f"  rows: {t.missing} missing, {t.extra} extra, {t.different} different")
    for d in t.diffs:
        times = f" (x{d.count})" if d.count != 1 else ""
        if d.kind is DiffKind.DIFFERENT:
            cols = "; ".join(
                f"{c}: {_show(u)} upstream, {_show(v)} downstream"
                for c, u, v in zip(d.columns, d.upstream, d.downstream, strict=True)
            )
            lines.append(f"  different  {d.key_text()}: {cols}")
        else:
            where = "downstream" if d.kind is DiffKind.MISSING else "upstream"
            lines.append(f"  {d.kind.value:<9}  {d.key_text()}{times} (absent {where})")
    if len(t.diffs) < t.missing + t.extra + t.different:
        lines.append(f"  ... {t.missing + t.extra + t.different - len(t.diffs)} more not listed")
    lines += [f"  note: {n}" for n in t.notes]
    return lines
