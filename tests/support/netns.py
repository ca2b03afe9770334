"""Network namespaces on a private bridge, for tests (and the chaos harness) that cut links.

``private_net()`` makes a Linux bridge with an address in a private /24 (``10.231.X.0/24``, the
first X no interface on this machine uses; never the Kubernetes node tests' 10.209.0.0/16),
and ``Net.add(name)`` a namespace on it: a veth pair, the bridge end on this side, ``eth0``
with the next address in the namespace. The calling process stays in the root namespace and
reaches every namespace through the bridge's address (``Net.gateway``).

``Net.popen(node, argv)`` starts a process inside a namespace (``ip netns exec``, which
execs in place: the child's pid is the process itself, so SIGTERM/SIGKILL reach it).
``Net.partition(a, b)`` drops every packet between two namespaces (nftables rules in each of
the two namespaces, dropping both directions: a packet is lost, not refused, as in a real
partition); ``Net.heal(a, b)`` removes them, ``Net.heal_all()`` every cut.

Naming: ``trib<pid>-<name>`` for namespaces, ``tb<pid>`` for the bridge, ``tv<pid>-<n>`` for
the veth ends, where ``<pid>`` is the creating process: ``sweep()`` removes what a process
that died without cleaning up (kill -9) left behind, and nothing of a live one.

Invariant: when ``private_net()`` exits (normally or by an exception), every process still
running in one of its namespaces has been killed, and every namespace, veth, the bridge and
every rule (they live in the namespaces) are gone.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.components import component

log = logging.getLogger(__name__)

SUBNET_BASE = ipaddress.IPv4Network("10.231.0.0/16")  # one /24 of it per private_net
AVOID = ipaddress.IPv4Network("10.209.0.0/16")  # the Kubernetes node tests' range
TABLE = "tributary_partition"  # the nftables table (inet family) holding a namespace's cuts
_NS = re.compile(r"^trib(\d+)-")
_LINK = re.compile(r"^t[bv](\d+)(-\d+)?$")


class NetnsError(RuntimeError):
    """A namespace, link or rule could not be set up or removed."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why namespaces cannot be made here (the reason a test skips with), or None. The tools
    (iproute2, nftables) come from ``make deps``: a missing one fails at once."""
    if os.geteuid() != 0:
        return "network namespaces need root (run the tests as root)"
    component("iproute2")
    component("nftables")
    probe = f"trib{os.getpid()}-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    listed = _ip("netns", "list", check=False).stdout.splitlines()
    return [line.split()[0] for line in listed if line.strip()]


def _links() -> list[str]:
    out = _ip("-o", "link", "show", check=False).stdout.splitlines()
    names = []
    for line in out:
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def _kill_inside(ns: str) -> None:
    """SIGKILL every process in namespace ``ns`` (all of them were started by its owner)."""
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split() if p.isdigit()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    raise NetnsError(f"processes in namespace {ns} survived SIGKILL")


def _remove(namespaces: Sequence[str], links: Sequence[str]) -> list[str]:
    """Kill what runs inside, delete the namespaces (their veth ends go with them), then the
    links; the errors (every step is tried)."""
    errors = []
    for ns in namespaces:
        try:
            _kill_inside(ns)
        except NetnsError as e:
            errors.append(str(e))
        done = _ip("netns", "del", ns, check=False)
        if done.returncode != 0:
            errors.append(f"ip netns del {ns}: {done.stderr.strip()}")
    for link in links:  # a veth goes with its namespace (asynchronously): gone is fine
        if link in _links():
            done = _ip("link", "del", link, check=False)
            if done.returncode != 0 and link in _links():
                errors.append(f"ip link del {link}: {done.stderr.strip()}")
    return errors


def sweep() -> list[str]:
    """Remove namespaces and links of this naming whose creating process is gone; their names."""
    dead_ns = [ns for ns in _namespaces() if (m := _NS.match(ns)) and not _alive(int(m.group(1)))]
    dead_links = [ln for ln in _links() if (m := _LINK.match(ln)) and not _alive(int(m.group(1)))]
    if dead_ns or dead_links:
        log.warning("removing leftovers of dead test runs: %s", dead_ns + dead_links)
        _remove(dead_ns, sorted(dead_links, key=lambda n: not n.startswith("tv")))
    return dead_ns + dead_links


def _free_subnet() -> ipaddress.IPv4Network:
    used = []
    for line in _ip("-4", "-o", "addr", "show", check=False).stdout.splitlines():
        m = re.search(r"inet (\S+)", line)
        if m:
            used.append(ipaddress.IPv4Interface(m.group(1)).network)
    for subnet in SUBNET_BASE.subnets(new_prefix=24):
        if subnet.overlaps(AVOID):
            continue
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise NetnsError(f"no free /24 left in {SUBNET_BASE}")


@dataclass(frozen=True)
class Node:
    """One namespace on the bridge: its short name, the namespace's name and its address."""

    name: str
    ns: str
    ip: str

    def url(self, port: int, scheme: str = "http") -> str:
        return f"{scheme}://{self.ip}:{port}"

    def addr(self, port: int) -> str:
        return f"{self.ip}:{port}"


@dataclass
class Net:
    """The bridge and its namespaces; made by :func:`private_net`."""

    subnet: ipaddress.IPv4Network
    bridge: str
    tag: str
    nodes: dict[str, Node] = field(default_factory=dict)
    veths: list[str] = field(default_factory=list)
    cuts: set[frozenset[str]] = field(default_factory=set)

    @property
    def gateway(self) -> str:
        """The bridge's address: how the root namespace (the test process) is seen."""
        return str(self.subnet.network_address + 1)

    def add(self, name: str) -> Node:
        """A new namespace ``name`` on the bridge, with loopback and ``eth0`` up."""
        if name in self.nodes:
            raise NetnsError(f"namespace {name!r} exists already")
        index = len(self.nodes) + 2  # .1 is the bridge
        ns = f"trib{self.tag}-{name}"
        veth = f"tv{self.tag}-{index}"
        ip = str(self.subnet.network_address + index)
        _ip("netns", "add", ns)
        self.nodes[name] = node = Node(name, ns, ip)  # registered first: teardown removes it
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        self.veths.append(veth)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        return node

    def argv(self, node: Node, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``node``'s namespace."""
        return ["ip", "netns", "exec", node.ns, *argv]

    def popen(self, node: Node, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``node``'s namespace (``subprocess.Popen`` keyword arguments)."""
        return subprocess.Popen(self.argv(node, argv), **kwargs)

    def run(
        self, node: Node, argv: Sequence[str], *, stdin: str | None = None, timeout: float = 30
    ) -> str:
        """Run ``argv`` inside the namespace to its end; its output (raises on failure)."""
        done = subprocess.run(
            self.argv(node, argv), input=stdin, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise NetnsError(f"{' '.join(argv)} in {node.name}: {done.stderr.strip()}")
        return done.stdout

    def partition(self, a: Node, b: Node) -> None:
        """Drop every packet between ``a`` and ``b`` (both ways); the rest of the net is intact."""
        key = frozenset((a.name, b.name))
        if a.name == b.name or key in self.cuts:
            raise NetnsError(f"cannot cut {a.name} from {b.name} (same node or cut already)")
        self.cuts.add(key)
        for here in (a, b):
            self._apply_cuts(here)
        log.info("partitioned %s (%s) from %s (%s)", a.name, a.ip, b.name, b.ip)

    def heal(self, a: Node, b: Node) -> None:
        """Undo :meth:`partition` of ``a`` and ``b``."""
        key = frozenset((a.name, b.name))
        if key not in self.cuts:
            raise NetnsError(f"{a.name} and {b.name} are not partitioned")
        self.cuts.discard(key)
        for here in (a, b):
            self._apply_cuts(here)
        log.info("healed %s and %s", a.name, b.name)

    def heal_all(self) -> None:
        """Undo every partition."""
        touched = {name for cut in self.cuts for name in cut}
        self.cuts.clear()
        for name in sorted(touched):
            self._apply_cuts(self.nodes[name])

    def _apply_cuts(self, node: Node) -> None:
        """Replace ``node``'s table by one dropping its remaining cuts (one nft transaction)."""
        peers = sorted(
            self.nodes[other].ip
            for cut in self.cuts
            if node.name in cut
            for other in cut
            if other != node.name
        )
        script = [f"add table inet {TABLE}", f"delete table inet {TABLE}"]
        if peers:
            script.append(f"add table inet {TABLE}")
            for chain, hook, match in (
                ("cut_in", "input", "saddr"),
                ("cut_out", "output", "daddr"),
            ):
                script.append(
                    f"add chain inet {TABLE} {chain} "
                    f"{{ type filter hook {hook} priority -10 ; policy accept ; }}"
                )
                script += [f"add rule inet {TABLE} {chain} ip {match} {ip} drop" for ip in peers]
        self.run(node, ["nft", "-f", "-"], stdin="\n".join(script) + "\n")

    def close(self) -> None:
        """Kill every process in the namespaces; remove namespaces, veths and the bridge."""
        self.cuts.clear()
        errors = _remove([n.ns for n in self.nodes.values()], [*self.veths, self.bridge])
        self.nodes.clear()
        self.veths.clear()
        if errors:
            raise NetnsError("teardown incomplete: " + "; ".join(errors))


@contextmanager
def private_net() -> Iterator[Net]:
    """A bridge on a free /24 of 10.231.0.0/16; everything on it is removed on exit."""
    sweep()
    tag = str(os.getpid())
    bridge = f"tb{tag}"
    with _lock():
        subnet = _free_subnet()
        _ip("link", "add", bridge, "type", "bridge")
        net = Net(subnet, bridge, tag)
        try:
            _ip("addr", "add", f"{net.gateway}/{subnet.prefixlen}", "dev", bridge)
            _ip("link", "set", bridge, "up")
        except BaseException:
            net.close()
            raise
    try:
        yield net
    finally:
        net.close()


@contextmanager
def _lock() -> Iterator[None]:
    """Serialise subnet choice between concurrent test processes on this machine."""
    import fcntl

    path = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / "tributary-netns.lock"
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
