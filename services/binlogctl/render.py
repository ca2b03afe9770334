"""Turning command results into what the operator reads: an aligned table and
sentences by default, JSON with ``--json``.

Node records are shown in JSON exactly as tidb-binlog stores them (``nodeId``,
``host``, ``state``, ``maxCommitTS``, ...). Timestamps are TSO values; their wall
clock time is the physical part (``ts >> 18`` milliseconds since the epoch).
Invariant: rendering is pure (no I/O); times use the zone given, else the host's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

from services.binlogctl.errors import singular
from services.binlogctl.results import (
    ActionApplied,
    Encrypted,
    MetaWritten,
    NodeList,
    Result,
    StateExported,
    StateUpdated,
)
from tributary.registry.status import NodeStatus
from tributary.wire import ts as tso

_COLUMNS = ("NODE ID", "ADDRESS", "STATE", "MAX COMMIT TS", "COMMIT TIME", "UPDATE TIME")


def format_ts(ts: int, tz: tzinfo | None = None) -> str:
    """``449812345678901249`` -> ``2024-05-16 20:27:19.742 +08:00`` (``-`` for 0)."""
    if ts <= 0:
        return "-"
    when = datetime.fromtimestamp(tso.physical_ms(ts) / 1000, UTC).astimezone(tz)
    offset = when.strftime("%z")
    return f"{when.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]} {offset[:3]}:{offset[3:]}"


def record(status: NodeStatus) -> Any:
    """The node's record as the JSON object tidb-binlog stores."""
    return json.loads(status.to_json())


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    head = "  ".join(cell.ljust(w) for cell, w in zip(header, widths, strict=True))
    return "\n".join(line.rstrip() for line in (head, *lines))


def node_table(nodes: Sequence[NodeStatus], tz: tzinfo | None = None) -> str:
    rows = [
        (
            n.node_id,
            n.addr,
            n.state.value,
            str(n.max_commit_ts),
            format_ts(n.max_commit_ts, tz),
            format_ts(n.update_ts, tz),
        )
        for n in nodes
    ]
    return table(rows, _COLUMNS)


def render_text(result: Result, tz: tzinfo | None = None) -> str:
    match result:
        case NodeList(kind=kind, nodes=nodes, hidden_offline=hidden):
            hint = f" ({hidden} offline hidden; add --show-offline-nodes)" if hidden else ""
            if not nodes:
                return f"no {'online ' if hidden else ''}{kind.value} registered{hint}"
            stuck = "".join(
                f"\n{n.node_id}: {len(n.stuck_prewrites)} prewrites stuck past max-txn-timeout"
                f" (start ts {', '.join(map(str, n.stuck_prewrites[:10]))}"
                f"{', ...' if len(n.stuck_prewrites) > 10 else ''})"
                for n in nodes
                if n.stuck_prewrites
            )
            return node_table(nodes, tz) + stuck + (f"\n{hint.strip(' ()')}" if hint else "")
        case StateUpdated(kind=kind, before=before, after=after):
            return (
                f"{singular(kind)} {after.node_id}: state {before.state.value} -> "
                f"{after.state.value} (written to etcd)"
            )
        case ActionApplied() as a:
            noun = singular(a.kind)
            if a.final is None:
                return f"{noun} {a.node_id} accepted {a.action}: now {a.accepted_state}"
            return f"{noun} {a.node_id} is {a.final.state.value}"
        case MetaWritten(path=path, text=text):
            return f"{text.rstrip()}\n(written to {path})"
        case Encrypted(ciphertext=ciphertext):
            return ciphertext
        case StateExported(path=None, text=text):
            return text.rstrip("\n")  # the export itself, for a redirect or kubectl exec
        case StateExported(path=path, state=s):
            return (
                f"exported {s.node_id or 'the drainer'} of cluster {s.cluster_id}: checkpoint "
                f"{s.commit_ts} ({format_ts(s.commit_ts, tz)}, from the {s.source}), "
                f"{len(s.jobs)} DDL jobs up to schema version {s.schema_version}\n"
                f"(written to {path})"
            )
    raise TypeError(f"cannot render {result!r}")


def render_json(result: Result) -> str:
    doc: Any
    match result:
        case NodeList(nodes=nodes):
            doc = [record(n) for n in nodes]
        case StateUpdated(after=after):
            doc = record(after)
        case ActionApplied() as a:
            doc = {
                "nodeId": a.node_id,
                "action": a.action,
                "url": a.url,
                "acceptedState": a.accepted_state,
                "state": a.final.state.value if a.final else a.accepted_state,
                "record": record(a.final) if a.final else None,
            }
        case MetaWritten(path=path, commit_ts=commit_ts):
            doc = {"commitTS": commit_ts, "path": str(path)}
        case Encrypted(ciphertext=ciphertext):
            doc = {"encrypted": ciphertext}
        case StateExported(path=None, text=text):
            return text.rstrip("\n")
        case StateExported(path=path, state=s):
            doc = {
                "path": str(path),
                "clusterID": s.cluster_id,
                "commitTS": s.commit_ts,
                "source": s.source,
                "ddlJobs": len(s.jobs),
                "schemaVersion": s.schema_version,
            }
        case _:
            raise TypeError(f"cannot render {result!r}")
    return json.dumps(doc, indent=2)


def render(result: Result, *, as_json: bool = False, tz: tzinfo | None = None) -> str:
    return render_json(result) if as_json else render_text(result, tz)


def update_warning(command: str, kind_noun: str) -> str:
    return (
        f"warning: {command} only rewrites the {kind_noun}'s record in etcd. Use it to repair "
        f"the record of a {kind_noun} whose process is dead; a running {kind_noun} overwrites "
        f"it at its next heartbeat. To stop a running {kind_noun}, use pause-{kind_noun} or "
        f"offline-{kind_noun}."
    )
