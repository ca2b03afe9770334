"""The pumps' auto pilot's kopf timer for BinlogCluster: a thin translation over ``autopilot``.

Every ``autoscale_interval`` seconds, one look (``Autopilot.look``): with
``spec.pumps.autoscale`` a decision, written to ``spec.pumps.replicas`` and told in an event
(``AutoscaleUp``/``AutoscaleDown``/``AutoscaleBounds``, with the measured rate) and in
``status.autoscale``; for every cluster, autoscaled or scaled by hand (``kubectl scale``, an
HPA), the ``Scaling`` condition: True with the step's progress (``pumps 2 -> 1: taking
demo-pump-1 offline (demo-pump-1 closing)``) while one is under way, False (``Stable``)
otherwise, and a ``Scaled`` event when a step ends. Invariant: the condition is written only
when it changed and ``status.autoscale`` only when its figures did, so an idle cluster without
autoscale costs one StatefulSet read per tick.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import kopf

from binlog_operator import GROUP, PLURAL, VERSION
from binlog_operator.autopilot import Look
from binlog_operator.conditions import Change
from binlog_operator.context import Context
from binlog_operator.kube import KubeError
from binlog_operator.options import from_env
from binlog_operator.rollhandlers import condition
from binlog_operator.spec import ClusterSpec

log = logging.getLogger(__name__)
INTERVAL = from_env().autoscale_interval
EVENTS = {"ScaleUp": "AutoscaleUp", "ScaleDown": "AutoscaleDown", "Bounds": "AutoscaleBounds"}


@kopf.timer(GROUP, VERSION, PLURAL, interval=INTERVAL, initial_delay=3.0)
async def pilot_pumps(
    body: kopf.Body,
    name: str,
    namespace: str | None,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """One look of the auto pilot: a decision with autoscale, the ``Scaling`` condition."""
    ctx: Context = memo.ctx
    assert namespace is not None
    if (live := ctx.live_spec(body)) is None:
        return
    spec = live[0]
    try:
        look = await ctx.autopilot.look(name, namespace, spec, body)
    except KubeError as e:
        log.warning("%s/%s: the pumps' auto pilot did not look: %s", namespace, name, e)
        return
    _figures(body, patch, look)
    change = _scaling(spec, look)
    was = condition(body, "Scaling")
    if was.get("status") == "True" and not change.status:
        kopf.info(body, reason="Scaled", message=f"{_since(was)}{change.message}")
    if (was.get("status"), was.get("reason"), was.get("message")) != (
        "True" if change.status else "False",
        change.reason,
        change.message,
    ):
        await ctx.report(namespace, name, change)


def _figures(body: kopf.Body, patch: kopf.Patch, look: Look) -> None:
    """``status.autoscale`` from the decision, and its event when the decision was written."""
    old = dict((body.get("status") or {}).get("autoscale") or {})
    d = look.decision
    if d is None:
        if old and not (body.get("spec") or {}).get("pumps", {}).get("autoscale"):
            patch.status["autoscale"] = None  # autoscale removed from the spec
        return
    figures = d.figures()
    if look.wrote:
        figures["lastScaleTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kopf.info(body, reason=EVENTS.get(d.reason, "Autoscale"), message=d.message)
    elif old.get("lastScaleTime"):
        figures["lastScaleTime"] = old["lastScaleTime"]
    if figures != old:
        patch.status["autoscale"] = figures


def _scaling(spec: ClusterSpec, look: Look) -> Change:
    d = look.decision
    if look.wrote and d is not None:
        reason = "ScalingUp" if d.desired > spec.pumps.replicas else "ScalingDown"
        return Change("Scaling", True, reason, d.message)
    if look.step is not None:
        s = look.step
        return Change(
            "Scaling", True, "ScalingUp" if s.after > s.before else "ScalingDown", s.message
        )
    n = spec.pumps.replicas
    return Change("Scaling", False, "Stable", f"{n} pump{'s' if n != 1 else ''} ready")


def _since(was: dict[str, Any]) -> str:
    """``pumps 1 -> 2 took 41 s: `` from the condition that was True."""
    step = str(was.get("message", "")).partition(":")[0]
    try:
        began = datetime.fromisoformat(str(was["lastTransitionTime"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return f"{step} done: "
    return f"{step} done in {(datetime.now(UTC) - began).total_seconds():.0f} s: "
