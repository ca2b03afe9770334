"""The rolling update's kopf timer for BinlogCluster: a thin translation over ``rolling``.

Every ``roll_interval`` seconds, under the cluster's lock (``Context.lock``, also held by the
applies): one step of the roll (``Rollout.advance``), a ``RollingUpdate`` event per pod released
to the new template, ``status.images`` (the versions each component's pods run) and the
``Upgrading`` condition: True with the progress (``pumps 1/3, drainers 0/1 updated; waiting
for c-pump-1: not ready``) while a roll is held or under way, False (``UpToDate``) otherwise.
A roll that has waited for the same pod longer than ``roll_progress_deadline`` says so: reason
``ProgressDeadlineExceeded`` (as a Deployment's ``Progressing`` condition does) and one Warning
event; it keeps waiting, since going on would take a second pump away. The clock is the
operator's own (``memo``, per cluster): a restarted operator starts it again.
Invariant: the condition and the images are written only when they changed, so an idle cluster
costs two label-selected lists per tick and no write.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

from binlog_operator import GROUP, PLURAL, VERSION
from binlog_operator.conditions import Change
from binlog_operator.context import Context
from binlog_operator.kube import KubeError
from binlog_operator.options import from_env
from binlog_operator.rollout import stalled

log = logging.getLogger(__name__)
INTERVAL = from_env().roll_interval


def condition(body: kopf.Body, type_: str) -> dict[str, Any]:
    """The body's condition of ``type_`` ({} when it has none)."""
    found = (body.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in found if c.get("type") == type_), {})


@kopf.timer(GROUP, VERSION, PLURAL, interval=INTERVAL, initial_delay=2.0)
async def advance_rollout(
    body: kopf.Body,
    name: str,
    namespace: str | None,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """One step of a rolling update (``rolling``): the next partition lowered when the pods
    before it are back, the ``Upgrading`` condition and ``status.images`` kept current."""
    ctx: Context = memo.ctx
    assert namespace is not None
    if (live := ctx.live_spec(body)) is None:
        return
    spec = live[0]
    upgrading = condition(body, "Upgrading")
    try:
        async with ctx.lock(namespace, name):
            report = await ctx.rollout.advance(
                name, namespace, spec, watching=upgrading.get("status") == "True"
            )
    except KubeError as e:
        log.warning("%s/%s: rolling update not advanced: %s", namespace, name, e)
        return
    for pod in report.stepped:
        kopf.info(body, reason="RollingUpdate", message=f"{pod} released to the new template")
    shown = {k: v for k, v in report.versions.items() if v}
    if ((body.get("status") or {}).get("images") or {}) != shown:
        patch.status["images"] = report.versions
    p = report.plan
    now = time.monotonic()
    stall = memo["roll_stall"] = stalled(memo.get("roll_stall"), p.waiting * p.rolling, now)
    waited = stall.seconds(now) if stall is not None else 0.0
    if not p.rolling:
        change = Change("Upgrading", False, "UpToDate", p.message())
    elif waited > (deadline := ctx.options.roll_progress_deadline):
        message = f"{p.message()} (for more than {deadline:.0f} s)"
        change = Change("Upgrading", True, "ProgressDeadlineExceeded", message)
        if upgrading.get("reason") != "ProgressDeadlineExceeded":
            kopf.warn(body, reason="ProgressDeadlineExceeded", message=message)
    else:
        change = Change("Upgrading", True, "RollingUpdate", p.message())
    was = (upgrading.get("status"), upgrading.get("reason"), upgrading.get("message"))
    if was != ("True" if change.status else "False", change.reason, change.message):
        await ctx.report(namespace, name, change)
