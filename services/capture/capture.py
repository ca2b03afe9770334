"""One capture's life in the cluster: registration, owner campaign, processor reactor.

* Registration: the ``CaptureInfo`` is put at ``__cdc_meta__/capture/<id>`` bound to a lease of
  ``session_ttl`` seconds, refreshed every ttl/3; when the lease is lost the key is put again
  under a new one (meanwhile the owner may have moved this capture's changefeeds away, and the
  processor manager runs nothing while the key is missing).
* Owner: campaign with ``coord.election`` under ``__cdc_meta__/owner/``; once elected, run the
  ``Owner`` reactor with every txn guarded by the election key (its create revision is the
  owner epoch), until the election is lost or the reactor sees another owner (a resign through
  the API deletes the key); then campaign again, at most once a second.
* Processors: an ``EtcdWorker`` running the ``ProcessorManager``, restarted after an etcd error.

Invariant: every task runs under the caller's TaskGroup; ``close`` stops the processors,
resigns ownership and revokes the registration so the cluster reacts at once, not after a TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from services.capture.errors import NotOwner
from services.capture.manager import ProcessorFactory, ProcessorManager
from services.capture.owner import Owner
from services.capture.worker import EtcdWorker
from tributary.cdc.keys import Keys
from tributary.cdc.model import CaptureInfo
from tributary.coord.election import Election, ElectionLost
from tributary.coord.kv import Kv, KvError, Lease

log = logging.getLogger(__name__)

CAMPAIGN_PAUSE = 1.0  # seconds between two campaigns (TiCDC rate-limits them to 1/s)


class Capture:
    def __init__(
        self,
        kv: Kv,
        keys: Keys,
        info: CaptureInfo,
        make_processor: ProcessorFactory,
        *,
        session_ttl: int = 10,
        owner_interval: float = 0.2,
        processor_interval: float = 0.2,
        checkpoint_interval: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kv = kv
        self.keys = keys
        self.info = info
        self._make = make_processor
        self._ttl = session_ttl
        self._owner_interval = owner_interval
        self._processor_interval = processor_interval
        self._checkpoint_interval = checkpoint_interval
        self._monotonic = monotonic
        self.registered = asyncio.Event()
        self.manager: ProcessorManager | None = None
        self._election: Election | None = None
        self._lease: Lease | None = None
        self.owner: Owner | None = None  # the owner reactor while this capture owns

    @property
    def id(self) -> str:
        return self.info.id

    def is_owner(self) -> bool:
        return self._election is not None and self._election.is_leader()

    def start(self, tg: asyncio.TaskGroup) -> list[asyncio.Task[None]]:
        """Start registration, the owner campaign and the processor reactor in ``tg``; the
        caller cancels the returned loops after ``close``."""
        self.manager = ProcessorManager(
            self.keys,
            self.id,
            self._make,
            tg,
            flush_interval=self._checkpoint_interval,
            monotonic=self._monotonic,
        )
        return [
            tg.create_task(self._register_loop(), name=f"capture-register-{self.id}"),
            tg.create_task(
                self._processor_loop(self.manager), name=f"capture-processors-{self.id}"
            ),
            tg.create_task(self._owner_loop(), name=f"capture-owner-{self.id}"),
        ]

    async def close(self) -> None:
        """Stop processors, resign, deregister (the caller then cancels the loops)."""
        if self.manager is not None:
            await self.manager.close()
        election = self._election
        if election is not None:
            with contextlib.suppress(KvError):
                await election.resign()
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                async with asyncio.timeout(2.0):
                    await lease.revoke()
            except (KvError, TimeoutError) as e:
                log.warning("could not revoke the capture lease (it will expire): %s", e)

    async def _register_loop(self) -> None:
        key = self.keys.capture_key(self.id)
        while True:
            try:
                sent = self._monotonic()
                lease = await self.kv.grant_lease(self._ttl)
                self._lease = lease
                await self.kv.put(key, self.info.to_json(), lease.id)
                self.registered.set()
                log.info("capture %s registered (lease %x, ttl %d s)", self.id, lease.id, self._ttl)
                await self._keep_alive(lease, sent + self._ttl)
            except KvError as e:
                log.warning("capture %s registration failed, retrying: %s", self.id, e)
            self.registered.clear()
            await asyncio.sleep(0.5)

    async def _keep_alive(self, lease: Lease, deadline: float) -> None:
        """Refresh until the lease is certainly lost (refused, or unanswered past its TTL)."""
        period = self._ttl / 3
        while True:
            await asyncio.sleep(period)
            sent = self._monotonic()
            try:
                async with asyncio.timeout(period):
                    await lease.refresh()
                deadline = sent + self._ttl
            except (KvError, TimeoutError) as e:
                retriable = isinstance(e, TimeoutError) or e.retriable
                if not retriable or self._monotonic() >= deadline:
                    log.warning("capture %s lost its lease: %s", self.id, e)
                    return

    async def _processor_loop(self, manager: ProcessorManager) -> None:
        while True:
            worker = EtcdWorker(
                self.kv,
                self.keys,
                manager,
                interval=self._processor_interval,
                name=f"processor-worker-{self.id}",
            )
            try:
                await worker.run()
            except KvError as e:
                log.warning("capture %s: processor reactor restarts after: %s", self.id, e)
            await asyncio.sleep(0.5)

    async def _owner_loop(self) -> None:
        await self.registered.wait()
        while True:
            try:
                async with Election(
                    self.kv, self.keys.owner_prefix, self.id.encode(), self._ttl
                ) as election:
                    epoch = await election.campaign()
                    self._election = election
                    try:
                        await self._own(election, epoch)
                    finally:
                        self._election = None
                        with contextlib.suppress(KvError):
                            await election.resign()
            except (ElectionLost, NotOwner) as e:
                log.warning("capture %s: ownership ended: %s", self.id, e)
            except KvError as e:
                log.warning("capture %s: owner campaign failed: %s", self.id, e)
            await asyncio.sleep(CAMPAIGN_PAUSE)

    async def _own(self, election: Election, epoch: int) -> None:
        log.info("capture %s is the owner (epoch %d)", self.id, epoch)
        self.owner = Owner(self.keys, self.id, epoch)
        worker = EtcdWorker(
            self.kv,
            self.keys,
            self.owner,
            guards=lambda: [election.guard()],
            interval=self._owner_interval,
            name=f"owner-worker-{self.id}",
        )
        run = asyncio.create_task(worker.run(), name=f"owner-reactor-{self.id}")
        lost = asyncio.create_task(election.lost.wait(), name=f"owner-lost-{self.id}")
        try:
            await asyncio.wait({run, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.owner = None
            for task in (run, lost):
                task.cancel()
            await asyncio.gather(run, lost, return_exceptions=True)
        failure = run.exception() if run.done() and not run.cancelled() else None
        if failure is not None:
            raise failure
        raise ElectionLost("owner election lost")
