"""``--netns``: each pump, etcd member, the drainer and each capture in a network namespace of its
own, and the partition faults that cut links between them.

``ChaosNet`` wraps a :class:`~tests.support.netns.Net` (a private bridge; the harness, the
MariaDB servers and the writers stay in the root namespace and are reached through the bridge
address): ``place(name)`` is the ``DemoCluster``/``Captures`` placement, making the namespace on
first use (a restarted node gets its namespace back). ``cut(a, others)`` drops every packet
between ``a`` and each of ``others`` and returns the heal; the cuts are nftables rules inside the
namespaces, so they go with the net on exit.

The partition faults (``partition`` action; the victim names the link):

* ``pump_etcd``: a pump cut from every etcd member. It cannot renew its registration, so after
  ``REGISTRATION_TIMEOUT`` it must refuse prewrites (``UNAVAILABLE``). A probe sends it a
  prewrite straight (not through the pump client) every ``PROBE_EVERY`` seconds, rolling back at
  once any that is taken; a probe sent ``REFUSE_WITHIN`` seconds or more after the cut and taken
  is a violation. The writers' pump client must move to the other pumps meanwhile.
* ``drainer_pump``: the drainer cut from one pump (by index); it must wait for the pump, not skip
  it, and catch up after the heal (the end-of-cycle checks).
* ``capture_etcd`` / ``owner_etcd``: a capture (by index) or the capture owner cut from every
  etcd member and from the other captures; its lease lapses, and it must stop owning and
  processing (the owner watch: no two owners at once), and rejoin after the heal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status

from tests.support.netns import Net, Node
from tributary.tso.client import Tso
from tributary.wire.binlog import Binlog, BinlogType, PumpStub, WriteBinlogReq

log = logging.getLogger(__name__)

REGISTRATION_TIMEOUT = 4.0  # seconds; a pump cut from etcd refuses prewrites after this
# the pumps' flags under --netns (as tests/support/netns_cluster.py): a short heartbeat and
# registration timeout, so a pump cut from etcd refuses prewrites within seconds
PUMP_ARGS = ("--heartbeat-interval", "1", "--registration-timeout", str(int(REGISTRATION_TIMEOUT)))
PARTITION_HOLD = (6.5, 10.0)  # seconds a link stays cut
REFUSE_WITHIN = REGISTRATION_TIMEOUT + 2.0  # a cut pump must refuse prewrites by then
PROBE_EVERY = 0.5  # seconds between two probe prewrites to a pump cut from etcd
PROBE_TIMEOUT = 3.0  # seconds one probe (timestamp + write) may take


@dataclass
class ChaosNet:
    """The namespaces of a ``--netns`` run, the cuts, and what the pump probe found."""

    net: Net
    violations: list[str] = field(default_factory=list)
    refused_after_s: list[float] = field(default_factory=list)  # cut -> first refused prewrite
    probes_taken: int = 0  # probe prewrites a cut pump took (and that were rolled back)

    @property
    def gateway(self) -> str:
        """The root namespace's address on the bridge (where the MariaDB servers listen)."""
        return self.net.gateway

    def node(self, name: str) -> Node:
        return self.net.nodes.get(name) or self.net.add(name)

    def place(self, name: str) -> tuple[str, Sequence[str]]:
        node = self.node(name)
        return node.ip, self.net.argv(node, [])

    def cut(self, name: str, others: Iterable[str]) -> Callable[[], None]:
        """Drop every packet between ``name`` and each of ``others``; the heal."""
        a = self.net.nodes[name]
        bs = [self.net.nodes[o] for o in others if o != name]
        done = []
        try:
            for b in bs:
                self.net.partition(a, b)
                done.append(b)
        except BaseException:
            for b in done:
                self.net.heal(a, b)
            raise

        def heal() -> None:
            for b in done:
                self.net.heal(a, b)

        return heal

    async def hold_pump_cut(
        self, pump: str, addr: str, cluster_id: int, tso: Tso, hold: float
    ) -> None:
        """``hold`` seconds of probing the pump at ``addr`` (cut from etcd already): from the
        first refused prewrite on, it is left alone; not refusing within ``REFUSE_WITHIN`` is a
        violation."""
        began = time.monotonic()
        refused = False
        while (elapsed := time.monotonic() - began) < hold:
            if not refused:
                try:
                    taken = await _probe(addr, cluster_id, tso)
                except (TimeoutError, OSError, GRPCError) as e:  # the TSO moving: again
                    log.info("probe of %s: %r", pump, e)
                else:
                    self.probes_taken += taken
                    if not taken:
                        refused = True
                        self.refused_after_s.append(round(time.monotonic() - began, 2))
                        log.info("%s refused a prewrite %.1f s after the cut", pump, elapsed)
                    elif elapsed > REFUSE_WITHIN:
                        self.violations.append(
                            f"{pump} took a prewrite {elapsed:.1f} s after it was cut from etcd "
                            f"(registration timeout {REGISTRATION_TIMEOUT:.0f} s)"
                        )
                        refused = True  # reported once; no more probes
            await asyncio.sleep(min(PROBE_EVERY, max(0.0, hold - elapsed)))


def _channel(addr: str) -> Channel:
    host, port = addr.rsplit(":", 1)
    return Channel(host, int(port))


async def _probe(addr: str, cluster_id: int, tso: Tso) -> bool:
    """One prewrite straight to the pump: False if refused (``UNAVAILABLE``); if taken, it is
    rolled back at once (so it never holds the pump's max commit ts) and True."""
    ch = _channel(addr)
    try:
        stub = PumpStub(ch)
        async with asyncio.timeout(PROBE_TIMEOUT):
            start = await tso.get_ts()
            prewrite = Binlog(
                tp=BinlogType(BinlogType.Prewrite),
                start_ts=start,
                prewrite_key=b"chaos-probe",
                prewrite_value=b"",
            )
            try:
                reply = await stub.write_binlog(
                    WriteBinlogReq(cluster_id=cluster_id, payload=bytes(prewrite))
                )
            except GRPCError as e:
                if e.status is Status.UNAVAILABLE:
                    return False
                raise
        if reply.errmsg:
            raise RuntimeError(f"pump {addr} answered {reply.errmsg!r}")
        # taken: roll it back, never given up on (a prewrite left alone would hold the pump)
        rollback = WriteBinlogReq(
            cluster_id=cluster_id,
            payload=bytes(Binlog(tp=BinlogType(BinlogType.Rollback), start_ts=start)),
        )
        for attempt in range(1, 6):
            try:
                reply = await stub.write_binlog(rollback, timeout=5)
            except (GRPCError, OSError, TimeoutError) as e:
                log.warning("rollback of probe %d on %s (attempt %d): %r", start, addr, attempt, e)
                continue
            if not reply.errmsg:
                return True
        raise RuntimeError(f"pump {addr} did not take the rollback of probe {start}")
    finally:
        ch.close()
