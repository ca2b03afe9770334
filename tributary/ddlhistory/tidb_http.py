"""``DdlHistory`` read from a real TiDB's HTTP status API (port 10080): ``GET /ddl/history``.

TiDB (``DDLHistoryJobHandler``, ``start_job_id`` since v6.2, pingcap/tidb#35838) answers
``/ddl/history?start_job_id=<id>&limit=<n>`` with at most ``n`` (1..2048) history jobs whose
id is at most ``id``, newest first, as a JSON array of jobs (``null`` when there are none);
without ``start_job_id`` it gives the newest ``n``, and with no parameter at all every job.
Errors are HTTP 400 with the message as text. Older servers ignore ``start_job_id``; that
shows as a page holding ids above the one asked for, and then the whole history is read once.

``jobs_since(v)`` pages backwards from the newest job and stops at the first page in which
no job is newer than ``v`` (job ids and schema versions grow together; jobs running
concurrently finish within a page of each other; cancelled jobs, version 0, do not count).
TiDB writes its own history, so ``put_job`` raises ``ReadOnlyHistory``. The history is TiDB's
as it is: since v6.2 it has jobs for the tables of ``mysql`` (database 1) but no job creating
that database, which TiDB writes straight into its store; readers seed it
(``services.drainer.schema.MYSQL_DB``).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterable

import aiohttp

from tributary.ddlhistory.errors import DdlHistoryError, MalformedJob, ReadOnlyHistory
from tributary.ddlhistory.jobjson import job_from_json
from tributary.ddlhistory.model import DdlJob

log = logging.getLogger(__name__)

MAX_LIMIT = 2048  # ddl.DefNumGetDDLHistoryJobs


def _newer(jobs: Iterable[DdlJob], schema_version: int) -> list[DdlJob]:
    newer = [j for j in jobs if j.schema_version > schema_version]
    return sorted(newer, key=lambda j: (j.schema_version, j.id))


class TidbHttpDdlHistory:
    def __init__(
        self, session: aiohttp.ClientSession, base_url: str, *, page_size: int = MAX_LIMIT
    ) -> None:
        if not 1 <= page_size <= MAX_LIMIT:
            raise ValueError(f"page size must be within 1..{MAX_LIMIT}, got {page_size}")
        self._session = session
        self._url = base_url.rstrip("/") + "/ddl/history"
        self._page_size = page_size

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls, base_url: str, *, request_timeout: float = 30.0, page_size: int = MAX_LIMIT
    ) -> AsyncIterator[TidbHttpDdlHistory]:
        """A history over its own HTTP session (``base_url`` like ``http://tidb:10080``)."""
        client_timeout = aiohttp.ClientTimeout(total=request_timeout)
        async with aiohttp.ClientSession(timeout=client_timeout) as session:
            yield cls(session, base_url, page_size=page_size)

    async def get_job(self, job_id: int) -> DdlJob | None:
        jobs = await self._fetch({"start_job_id": job_id, "limit": 1})
        if any(j.id > job_id for j in jobs):  # start_job_id was ignored
            jobs = await self._fetch({})
        return next((j for j in jobs if j.id == job_id), None)

    async def put_job(self, job: DdlJob) -> None:
        raise ReadOnlyHistory(f"TiDB keeps its own DDL history; cannot store job {job.id}")

    async def jobs_since(self, schema_version: int) -> list[DdlJob]:
        seen: dict[int, DdlJob] = {}
        params: dict[str, int] = {"limit": self._page_size}
        while True:
            page = await self._fetch(params)
            start = params.get("start_job_id")
            if start is not None and any(j.id > start for j in page):
                log.info("TiDB ignores start_job_id; reading its whole DDL history")
                return _newer(await self._fetch({}), schema_version)
            seen.update((j.id, j) for j in page)
            # Cancelled jobs carry no version (0): only versioned jobs can end the walk.
            versions = [j.schema_version for j in page if j.schema_version > 0]
            if len(page) < self._page_size or (versions and max(versions) <= schema_version):
                return _newer(seen.values(), schema_version)
            next_start = min(j.id for j in page) - 1
            if next_start < 1:
                return _newer(seen.values(), schema_version)
            params = {"start_job_id": next_start, "limit": self._page_size}

    async def _fetch(self, params: dict[str, int]) -> list[DdlJob]:
        try:
            async with self._session.get(self._url, params=params) as resp:
                body = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as e:
            raise DdlHistoryError(f"GET {self._url}: {e!r}", retriable=True) from e
        if status != 200:
            text = body[:300].decode("utf-8", "replace").strip()
            raise DdlHistoryError(
                f"GET {self._url} {params}: HTTP {status}: {text}", retriable=status >= 500
            )
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise MalformedJob(f"GET {self._url}: the answer is not JSON: {e}") from e
        if doc is None:
            return []
        if not isinstance(doc, list):
            raise MalformedJob(
                f"GET {self._url}: expected a list of jobs, got a {type(doc).__name__}"
            )
        return [job_from_json(d) for d in doc]
