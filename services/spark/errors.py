"""The error root of the Spark jobs: what the job's process reports before it exits non-zero."""

from __future__ import annotations

from tributary.errors import TributaryError


class JobError(TributaryError):
    """A job could not finish; ``retriable`` says whether running it again may help."""
