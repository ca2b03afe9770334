"""The lake's manifest: which Parquet files hold which commit-ts range, and how far the lake is
complete. Pure data and rules; ``services.spark.lake`` does the file work.

``_manifest.json`` lists ranges ``(start_ts, end_ts]``, each with its files (path relative to
the lake root, table, commit date, rows, min/max commit ts inside the file). Readers use only
listed files: a job killed before it rewrote the manifest leaves files nobody lists.

Rules: a range that starts at S supersedes every recorded range starting at or after S (a rerun
of an export, possibly longer, replaces the earlier attempt; their files are to be deleted);
``complete_ts`` is the end of the chain of contiguous ranges from the first one, so a reader
knows every change up to it is in the lake. Example: ranges (0,10], (10,25], (30,40] ->
complete_ts 25 (a gap at 25..30); adding (10,28] supersedes (10,25] and (30,40] -> ranges
(0,10], (10,28], complete_ts 28.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MANIFEST = "_manifest.json"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class LakeFile:
    path: str
    table: str
    commit_date: str
    rows: int
    min_commit_ts: int
    max_commit_ts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "table": self.table,
            "commit_date": self.commit_date,
            "rows": self.rows,
            "min_commit_ts": self.min_commit_ts,
            "max_commit_ts": self.max_commit_ts,
        }


@dataclass(frozen=True, slots=True)
class LakeRange:
    start_ts: int
    end_ts: int
    files: tuple[LakeFile, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "start_ts": self.start_ts,
            "end_ts": self.end_ts,
            "files": [f.to_json() for f in self.files],
        }


@dataclass(frozen=True, slots=True)
class Manifest:
    ranges: tuple[LakeRange, ...] = ()

    @property
    def complete_ts(self) -> int | None:
        """Every change up to this commit ts is in the lake (None: nothing yet)."""
        if not self.ranges:
            return None
        ordered = sorted(self.ranges, key=lambda r: r.start_ts)
        end = ordered[0].end_ts
        for r in ordered[1:]:
            if r.start_ts > end:
                break
            end = max(end, r.end_ts)
        return end

    def add(self, new: LakeRange) -> tuple[Manifest, list[LakeFile]]:
        """The manifest with ``new`` recorded, and the files of the ranges it supersedes."""
        kept = [r for r in self.ranges if r.start_ts < new.start_ts]
        gone = [f for r in self.ranges if r.start_ts >= new.start_ts for f in r.files]
        ranges = tuple(sorted([*kept, new], key=lambda r: r.start_ts))
        return Manifest(ranges), gone

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT_VERSION,
                "complete_ts": self.complete_ts,
                "ranges": [r.to_json() for r in self.ranges],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        d = json.loads(text)
        if d.get("format") != FORMAT_VERSION:
            raise ValueError(f"unknown lake manifest format {d.get('format')!r}")
        return cls(
            tuple(
                LakeRange(
                    int(r["start_ts"]),
                    int(r["end_ts"]),
                    tuple(LakeFile(**f) for f in r["files"]),
                )
                for r in d["ranges"]
            )
        )
