"""Settings that cannot change in place, and why an edit of one is refused (pure; no I/O).

What the operator applies once and must not change under running nodes:

* the cluster id: pumps hold binlogs of the cluster whose id is stored in their etcd
  (``/tidb-binlog/v1/cluster_id``); ``spec.etcd.endpoints`` may change (another member, a new
  name) only to an etcd holding that same id;
* a drainer's sink type once it has a checkpoint: the checkpoint lives with the sink (a
  ``mysql://`` sink's table downstream, a ``file://`` sink's directory, a Kafka savepoint), so a
  drainer moved to another kind of sink would find none and start over or skip binlogs. The
  type the pods run is recorded on the drainer's StatefulSet (``binlog.io/sink-type``). The URL of
  a ``sinkURISecret`` is never read by the operator, so its type is unknown and not checked;
* the volume of a drainer (``storage``): a StatefulSet's claim templates are fixed
  (``noderes.keep_claims`` keeps the live ones; a changed request is reported). A pump's (and a
  capture's) volume may grow, never shrink or change class (``volumes``);
* ``data-dir`` and the other keys ``configs`` manages, which a ``config`` may not set at all.

Invariant: every refusal message names the field, the value that runs, the value asked for and
what to do, since it is all the user sees (a condition and a Warning event).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from binlog_operator.spec import DrainerSpec
from tributary.errors import TributaryError

SINK_TYPE = "binlog.io/sink-type"
"""Annotation of a drainer's StatefulSet: the type of the sink its pods write to."""
CHANGE_REFUSED = "ChangeRefused"
"""The condition reason of a refused change (Degraded)."""
_ALIASES = {"tidb": "mysql"}  # as tributary.sinks.schemes.ALIASES: one sink under two names


class ChangeRefused(TributaryError):
    """An edit of the cluster's spec asks for a change that cannot be made in place; nothing of
    it is applied. ``retriable`` when the check itself could not be made (etcd unreachable)."""


def sink_type(d: DrainerSpec) -> str | None:
    """``kafka`` for a ``kafka`` block, a ``sinkURI``'s scheme (``tidb`` is ``mysql``), None
    for a ``sinkURISecret`` (the operator never reads it)."""
    if d.kafka is not None:
        return "kafka"
    if d.sink_secret is not None:
        return None
    try:
        scheme = urlsplit(d.sink_uri).scheme.lower()
    except ValueError:
        return None
    return _ALIASES.get(scheme, scheme) or None


def running_sink_type(live: Mapping[str, Any] | None) -> str | None:
    """The sink type recorded on a drainer's live StatefulSet (None: unknown or none)."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(SINK_TYPE) or None


def sink_change(
    drainer: str, running: str | None, wanted: str | None, checkpoint_ts: int
) -> str | None:
    """Why changing drainer ``drainer``'s sink from type ``running`` to ``wanted`` is refused,
    or None: refused only when both types are known, they differ and the drainer has saved a
    checkpoint (``checkpoint_ts`` > 0)."""
    if running is None or wanted is None or running == wanted or checkpoint_ts <= 0:
        return None
    return (
        f"drainer {drainer}: its sink type cannot change from {running} to {wanted} in place: "
        f"its checkpoint ({checkpoint_ts}) is kept by the {running} sink, and a {wanted} sink "
        f"would start without it. Put back the {running} sink, or add a new drainer (another "
        "name) for the new sink and remove this one once it has caught up"
    )


def etcd_change(
    applied: Sequence[str],
    wanted: Sequence[str],
    cluster_id: str | None,
    found_id: int | None,
) -> str | None:
    """Why moving the cluster from etcd ``applied`` to ``wanted`` is refused, or None.
    ``cluster_id`` is the id recorded while ``applied`` ran (None: none yet, nothing to keep),
    ``found_id`` the id ``wanted`` holds (None: no cluster id there)."""
    if not applied or sorted(applied) == sorted(wanted) or cluster_id is None:
        return None
    if found_id is not None and str(found_id) == cluster_id:
        return None
    holds = f"cluster id {found_id}" if found_id is not None else "no cluster id"
    return (
        f"spec.etcd.endpoints: the cluster id cannot change in place: the pumps hold binlogs of "
        f"cluster {cluster_id} (etcd {', '.join(applied)}), and {', '.join(wanted)} holds "
        f"{holds}. Put back the endpoints, or list members of the same etcd cluster"
    )


def storage_change(
    name: str, running: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why a drainer's claim templates cannot change from ``running`` to ``wanted`` (None when
    the same); a pump's grow (``volumes``)."""
    if _claims(running) == _claims(wanted):
        return None
    return (
        f"{name}: the volume cannot change in place (a StatefulSet's claim templates are fixed): "
        f"keeping {_claims(running)}, not {_claims(wanted)}"
    )


def _claims(templates: Sequence[Mapping[str, Any]]) -> str:
    """The claims' requests as a refusal names them, e.g. ``data: 1Gi``."""
    shown = []
    for c in templates:
        spec = c.get("spec") or {}
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        cls = spec.get("storageClassName")
        shown.append(f"{c['metadata']['name']}: {size}" + (f" ({cls})" if cls else ""))
    return ", ".join(shown) or "none"
