"""binlogctl's error root: what the operator is told when a command cannot be done.

Invariant: every failure a command expects (etcd unreachable, unknown node, a node
that refuses or cannot be reached, a timeout) leaves ``commands`` as a ``CtlError``
whose message says what failed and what to check, so the CLI prints it without a
traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

from tributary.errors import TributaryError
from tributary.registry.status import NodeKind


class CtlError(TributaryError):
    """A command failed; ``retriable`` says whether running it again may help."""


class EtcdUnreachable(CtlError):
    def __init__(self, endpoints: Sequence[str], cause: object) -> None:
        super().__init__(
            f"cannot reach etcd at {', '.join(endpoints)} (--pd-urls): {cause}", retriable=True
        )
        self.endpoints = tuple(endpoints)


class NodeNotFound(CtlError):
    def __init__(self, kind: NodeKind, node_id: str, known: Sequence[str]) -> None:
        noun = singular(kind)
        if known:
            listed = f"registered {kind.value}: {', '.join(known)}"
        else:
            listed = f"no {kind.value} are registered"
        super().__init__(f"no {noun} with node id {node_id!r} in etcd; {listed}")
        self.node_id = node_id
        self.known = tuple(known)


class WaitTimedOut(CtlError):
    """The node accepted the request but did not reach the wanted state in time."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retriable=True)


def singular(kind: NodeKind) -> str:
    """``pumps`` -> ``pump``."""
    return kind.value.removesuffix("s")
