"""The drainer's node state and operator requests (pure; no I/O).

    online --pause (or a stop signal)--> pausing --(stopped)--> paused
    online --close--> closing --(stopped)--> offline

Invariant: an operator action is accepted only while online, and the state
only moves along the arrows above. Pumps wait for the checkpoint of every
drainer that is not offline before they go offline themselves, so ``offline``
is recorded only by an operator's ``close``.
"""

from __future__ import annotations

import asyncio

from services.drainer.errors import DrainerError
from tributary.registry.status import NodeState
from tributary.servicekit.ops import Action, ActionRefused

__all__ = ["Action", "DrainerState", "StateError"]


class StateError(DrainerError, ActionRefused):
    """The requested action is not allowed in the current state."""


class DrainerState:
    def __init__(self, initial: NodeState = NodeState.ONLINE) -> None:
        self._state = initial
        self.exit = asyncio.Event()  # set once the drainer should stop

    @property
    def state(self) -> NodeState:
        return self._state

    def request(self, action: Action) -> NodeState:
        """Apply an operator action; only an online drainer accepts one."""
        if self._state is not NodeState.ONLINE:
            raise StateError(
                f"drainer is {self._state.value}; {action.value} needs an online drainer"
            )
        self._state = NodeState.PAUSING if action is Action.PAUSE else NodeState.CLOSING
        self.exit.set()
        return self._state

    def stopping(self) -> None:
        """A stop signal: like ``pause`` unless an action is already under way."""
        if self._state is NodeState.ONLINE:
            self._state = NodeState.PAUSING
        self.exit.set()

    def final(self) -> NodeState:
        """The state to record once stopped."""
        return NodeState.OFFLINE if self._state is NodeState.CLOSING else NodeState.PAUSED

    def settle(self, state: NodeState) -> None:
        self._state = state
