"""The error root of the Spark jobs: what the job's process reports before it exits non-zero."""

from __future__ import annotations


class JobError(Exception):
    """A job could not finish; ``retriable`` says whether running it again may help."""

    retriable = False

    def __init__(self, *args: object, retriable: bool | None = None) -> None:
        super().__init__(*args)
        if retriable is not None:
            self.retriable = retriable
