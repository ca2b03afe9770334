"""The pump's node state and what each state allows (pure; no I/O).

Invariant: prewrite binlogs are accepted only while the pump is ``online``;
commit, rollback and fake binlogs are accepted in every state until the pump
has gone offline, so transactions already in flight can finish.

    online --pause--> pausing --(server stopped)--> paused
    online --close--> closing --(drainers caught up)--> offline
"""

from __future__ import annotations

import asyncio

from tributary.registry.status import NodeState
from tributary.servicekit.ops import Action, ActionRefused

__all__ = ["Action", "PumpState", "StateError"]


class StateError(ActionRefused):
    """The requested action is not allowed in the current state."""


class PumpState:
    """Holds the current state and wakes whoever waits for an operator request."""

    def __init__(self, initial: NodeState = NodeState.ONLINE) -> None:
        self._state = initial
        self._requested: Action | None = None
        self.changed = asyncio.Event()

    @property
    def state(self) -> NodeState:
        return self._state

    @property
    def requested(self) -> Action | None:
        """The action an operator asked for, if any (the app acts on it)."""
        return self._requested

    def accepts_prewrite(self) -> bool:
        return self._state is NodeState.ONLINE

    def accepts_finish(self) -> bool:
        """Commit, rollback and fake binlogs: accepted until the pump is offline."""
        return self._state is not NodeState.OFFLINE

    def request(self, action: Action) -> NodeState:
        """Apply an operator action; only an online pump accepts one."""
        if self._state is not NodeState.ONLINE:
            raise StateError(f"pump is {self._state.value}; {action.value} needs an online pump")
        self._requested = action
        self._state = NodeState.PAUSING if action is Action.PAUSE else NodeState.CLOSING
        self.changed.set()
        return self._state

    def settle(self, state: NodeState) -> None:
        """Record the final state reached after a pause or close completed."""
        self._state = state
        self.changed.set()
