"""One capture's life in the cluster: registration, owner campaign, processor reactor.

* Registration: the ``CaptureInfo`` is put at ``__cdc_meta__/capture/<id>`` bound to a lease of
  ``session_ttl`` seconds, refreshed every ttl/6 (retried every 0.5 s at most after a failure);
  when the lease is lost the key is put again under a new one (meanwhile the owner may have
  moved this capture's changefeeds away, and the processor manager runs nothing while the key
  is missing).
* Lease fence (``fence``): the lease's local deadline (send time of the last answered
  keepalive + ttl) minus a margin of ttl/3. Once it passes, no sink write starts and every
  processor is cancelled, before etcd can expire the lease and the owner can hand the spans to
  another capture; it rises again when a keepalive is answered (the lease never lapsed) or a
  new lease holds the key.
* Owner: campaign with ``coord.election`` under ``__cdc_meta__/owner/``; once elected, run the
  ``Owner`` reactor with every txn guarded by the election key (its create revision is the
  owner epoch), until the election is lost, its lease's own fence falls (the same margin before
  the election lease's local deadline: it stops acting as owner before another capture can be
  elected), or the reactor sees another owner (a resign through the API deletes the key); then
  campaign again, at most once a second.
* Processors: an ``EtcdWorker`` running the ``ProcessorManager`` while the fence is up; it
  stops when the fence falls or after an etcd error, and a new one (a fresh read of etcd, so
  no decision is made on what the mirror held before) starts once the fence is up again.

Invariant: every task runs under the caller's TaskGroup; ``close`` stops the processors,
resigns ownership and revokes the registration so the cluster reacts at once, not after a TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine

from services.capture.errors import NotOwner
from services.capture.fence import LeaseFence, keepalive_interval
from services.capture.manager import ProcessorFactory, ProcessorManager
from services.capture.owner import Owner
from services.capture.worker import EtcdWorker
from tributary.cdc.keys import Keys
from tributary.cdc.model import CaptureInfo
from tributary.coord.election import Election, ElectionLost
from tributary.coord.kv import Kv, KvError, Lease

log = logging.getLogger(__name__)

CAMPAIGN_PAUSE = 1.0  # seconds between two campaigns (TiCDC rate-limits them to 1/s)
KEEPALIVE_RETRY = 0.5  # seconds between keepalives after one failed, at most
KEEPALIVE_TIMEOUT = 1.0  # seconds a keepalive may take, at least (etcd failover: 0.75 s)


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
        fence: LeaseFence | None = None,
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
        self.fence = fence or LeaseFence(session_ttl, monotonic=monotonic)
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
            fence=self.fence,
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
                self.fence.grant(sent)
                log.info("capture %s registered (lease %x, ttl %d s)", self.id, lease.id, self._ttl)
                await self._keep_alive(lease)
            except KvError as e:
                log.warning("capture %s registration failed, retrying: %s", self.id, e)
            self.fence.lose()
            self.registered.clear()
            await asyncio.sleep(0.5)

    async def _keep_alive(self, lease: Lease) -> None:
        """Refresh until the lease is certainly lost (refused, or unanswered past its TTL);
        every answered keepalive moves the fence's deadline to its send time + TTL."""
        period = keepalive_interval(self._ttl)
        pause = period
        while True:
            await asyncio.sleep(pause)
            sent = self._monotonic()
            try:
                async with asyncio.timeout(max(period, KEEPALIVE_TIMEOUT)):
                    await lease.refresh()
                self.fence.renewed(sent)
                pause = period
            except (KvError, TimeoutError) as e:
                retriable = isinstance(e, TimeoutError) or e.retriable
                if not retriable or self._monotonic() >= self.fence.deadline:
                    log.warning("capture %s lost its lease: %s", self.id, e)
                    return
                if self.fence.is_open():
                    log.info("capture %s: lease keepalive failed, retrying: %r", self.id, e)
                else:
                    log.warning("capture %s: lease keepalive failed, fenced: %r", self.id, e)
                pause = min(period, KEEPALIVE_RETRY)

    async def _processor_loop(self, manager: ProcessorManager) -> None:
        while True:
            await self.fence.wait_open()
            worker = EtcdWorker(
                self.kv,
                self.keys,
                manager,
                interval=self._processor_interval,
                name=f"processor-worker-{self.id}",
            )
            try:
                await _until_fallen(worker.run(), self.fence, f"processor-reactor-{self.id}")
            except KvError as e:
                log.warning("capture %s: processor reactor restarts after: %s", self.id, e)
            except _Fenced:
                log.warning(
                    "capture %s: lease fence fell (lease deadline in %.2f s): processors stopped",
                    self.id,
                    self.fence.deadline - self._monotonic(),
                )
                manager.halt()
                continue  # a new reactor, on a fresh read, once the fence is up again
            await asyncio.sleep(0.5)

    async def _owner_loop(self) -> None:
        await self.registered.wait()
        while True:
            try:
                async with Election(
                    self.kv,
                    self.keys.owner_prefix,
                    self.id.encode(),
                    self._ttl,
                    monotonic=self._monotonic,
                    keepalive=keepalive_interval(self._ttl),
                ) as election:
                    epoch = await election.campaign()
                    self._election = election
                    try:
                        await self._own(election, epoch)
                    finally:
                        self._election = None
                        with contextlib.suppress(KvError):
                            await election.resign()
            except (ElectionLost, NotOwner, _Fenced) as e:
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
        fenced = asyncio.create_task(self._owner_fence(election), name=f"owner-fence-{self.id}")
        tasks = (run, lost, fenced)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.owner = None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        failure = run.exception() if run.done() and not run.cancelled() else None
        if failure is not None:
            raise failure
        if fenced.done() and not fenced.cancelled():
            raise _Fenced("the owner's election lease may expire soon (fence)")
        raise ElectionLost("owner election lost")

    async def _owner_fence(self, election: Election) -> None:
        """Return once the election lease is within the fence margin of its local deadline
        (measured as the election measures it, from each keepalive's send time)."""
        margin = self.fence.margin
        while True:  # the deadline only moves forward: sleep until it, then look again
            left = election.deadline - margin - self._monotonic()
            if left <= 0:
                return
            await asyncio.sleep(left)


class _Fenced(Exception):
    """A lease fence fell while the work it guards was running."""


async def _until_fallen(work: Coroutine[None, None, None], fence: LeaseFence, name: str) -> None:
    """Run ``work`` until it ends (its result or error) or the fence falls (``_Fenced``)."""
    job = asyncio.create_task(work, name=name)
    fall = asyncio.create_task(fence.wait_fallen(), name=f"{name}-fence")
    try:
        await asyncio.wait({job, fall}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (job, fall):
            task.cancel()
        await asyncio.gather(job, fall, return_exceptions=True)
    if job.done() and not job.cancelled():
        job.result()  # its error, if any
        return
    raise _Fenced("lease fence fell")
