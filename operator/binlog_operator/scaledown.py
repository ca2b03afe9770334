"""Taking pumps out before their pods go: close each through its HTTP API, wait until the
registry shows it offline.

Invariant: ``close_pumps`` returns only when every named pump is offline in the registry (or
never registered, so it holds no binlog); a pump goes offline only after every drainer has
consumed its binlogs (the pump's own rule, see services/pump/lifecycle.py), so shrinking the
StatefulSet afterwards loses nothing. Any other outcome raises ``ScaleDownError`` and the caller
must leave the StatefulSet as it was.

Worked example: pumps c-pump-0..3 online, spec asks for 2. ``pods_to_close(4, 2)`` gives
[c-pump-3, c-pump-2] (highest ordinal first, the ones a StatefulSet removes). Both are online,
so each gets ``PUT /state/<pod>/close`` and turns ``closing``; the poll sees c-pump-3 offline
at once and c-pump-2 still closing while the drainer catches up, then offline: done, and the
caller shrinks to 2. Had c-pump-2 been ``paused``, c-pump-3 would already be closing (harmless:
it stays out of the next attempt's way), the error would name c-pump-2 and its state, and the
StatefulSet would keep 4 replicas.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tributary.coord.kv import KvError
from tributary.errors import TributaryError
from tributary.registry.registry import NodeRegistry, RegistryError
from tributary.registry.status import NodeKind, NodeState, NodeStatus, StatusError

log = logging.getLogger(__name__)


class ScaleDownError(TributaryError):
    """The pumps could not be taken offline; the StatefulSet must stay as it is."""

    retriable = True


class PumpCloser(Protocol):
    async def close(self, pod: str) -> None:
        """Ask the node (pump or drainer) serving as ``pod`` to go offline; raise
        ScaleDownError if refused."""


class Clock(Protocol):
    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def pods_to_close(current: int, desired: int, pod: Callable[[int], str]) -> list[str]:
    """The pods a shrink from ``current`` to ``desired`` removes, highest ordinal first."""
    return [pod(i) for i in range(current - 1, desired - 1, -1)]


async def close_pumps(
    pods: Sequence[str],
    closer: PumpCloser,
    registry: NodeRegistry,
    *,
    within: float,
    poll: float = 1.0,
    clock: Clock | None = None,
    kind: NodeKind = NodeKind.PUMP,
) -> None:
    """Also takes drainers offline (``kind=NodeKind.DRAINER``): the same states and rule."""
    clock = clock or SystemClock()
    deadline = clock.monotonic() + within
    what = "pump" if kind is NodeKind.PUMP else "drainer"
    for pod in pods:
        status = await _get(registry, pod, kind)
        if status is None or status.state in (NodeState.OFFLINE, NodeState.CLOSING):
            continue
        if status.state is not NodeState.ONLINE:
            raise ScaleDownError(
                f"{what} {pod} is {status.state.value}; only an online {what} can be closed "
                f"(resume it, or take it offline with binlogctl)"
            )
        log.info("closing %s %s", what, pod)
        await closer.close(pod)
    waiting = list(pods)
    while True:
        states = {pod: await _get(registry, pod, kind) for pod in waiting}
        waiting = [
            p for p, s in states.items() if s is not None and s.state is not NodeState.OFFLINE
        ]
        if not waiting:
            return
        if clock.monotonic() >= deadline:
            detail = ", ".join(f"{p} {_state(states[p])}" for p in waiting)
            raise ScaleDownError(f"{what}s not offline after {within:.0f} s: {detail}")
        await clock.sleep(poll)


def _state(status: NodeStatus | None) -> str:
    return "unregistered" if status is None else status.state.value


async def _get(registry: NodeRegistry, pod: str, kind: NodeKind) -> NodeStatus | None:
    try:
        return await registry.get(kind, pod)
    except (RegistryError, StatusError, KvError) as e:
        raise ScaleDownError(f"cannot read {pod}'s registry record: {e}") from e
