"""The demo's error root: everything the demo expects to go wrong, said plainly.

Invariant: a failure the user can act on (a missing etcd binary, a data dir that
is not the demo's, a child that would not start) reaches the CLI as a
``DemoError`` whose message says what to check; the CLI prints it without a
traceback.
"""

from __future__ import annotations

from tributary.errors import TributaryError


class DemoError(TributaryError):
    """The demo cannot go on; ``retriable`` says whether running it again may help."""
