"""The namespaces helper itself (``tests/support/netns.py``): a cut drops exactly the link it
names, a heal restores it, teardown leaves no namespace, link or process, and ``sweep`` removes
what a run killed with -9 left behind. Needs root; skips with the reason otherwise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import netns
from tests.support.netns import Net, Node, private_net

pytestmark = pytest.mark.timeout(120)

SERVE = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9000))
s.listen()
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"hi")
    c.close()
"""
CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], 9000), timeout=1) as c:
        print(c.recv(2).decode())
except OSError:
    print("unreachable")
"""


@pytest.fixture(scope="module", autouse=True)
def namespaces_possible() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)


def reach(net: Net | None, src: Node | None, dst: Node) -> bool:
    argv = [sys.executable, "-c", CONNECT, dst.ip]
    if net is None or src is None:  # from the root namespace
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    else:
        out = net.run(src, argv)
    return out.strip() == "hi"


def serve(net: Net, node: Node) -> subprocess.Popen[bytes]:
    proc = net.popen(node, [sys.executable, "-c", SERVE, node.ip], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with proc.stdout:  # it prints nothing more
        assert proc.stdout.readline() == b"listening\n"
    return proc


def ours() -> tuple[list[str], list[str]]:
    tag = str(os.getpid())
    return (
        [n for n in netns._namespaces() if n.startswith(f"trib{tag}-")],
        [ln for ln in netns._links() if ln in (f"tb{tag}",) or ln.startswith(f"tv{tag}-")],
    )


def test_a_cut_drops_only_its_link_and_a_heal_restores_it() -> None:
    with private_net() as net:
        a, b, c = net.add("a"), net.add("b"), net.add("c")
        assert str(net.subnet).startswith("10.231.")
        server = serve(net, b)
        assert reach(net, a, b) and reach(net, c, b) and reach(None, None, b)
        net.partition(a, b)
        assert not reach(net, a, b)
        assert reach(net, c, b) and reach(None, None, b)
        net.partition(c, b)
        net.heal(a, b)
        assert reach(net, a, b) and not reach(net, c, b)
        net.heal_all()
        assert reach(net, c, b)
    assert server.wait(10) == -signal.SIGKILL  # killed by the teardown
    assert ours() == ([], [])


def test_teardown_after_a_failure_leaves_nothing() -> None:
    with pytest.raises(RuntimeError), private_net() as net:
        node = net.add("x")
        server = serve(net, node)
        net.partition(node, net.add("y"))
        raise RuntimeError("the test failed")
    assert server.wait(10) == -signal.SIGKILL
    assert ours() == ([], [])


def test_sweep_removes_what_a_killed_run_left() -> None:
    leave = (
        "import time\n"
        "from tests.support.netns import private_net\n"
        "with private_net() as net:\n"
        "    node = net.add('z')\n"
        "    net.popen(node, ['sleep', '300'])\n"
        "    print(node.ns, flush=True)\n"
        "    time.sleep(300)\n"
    )
    root = Path(__file__).resolve().parents[2]
    run = subprocess.Popen([sys.executable, "-c", leave], stdout=subprocess.PIPE, cwd=root)
    assert run.stdout is not None
    with run.stdout:
        ns = run.stdout.readline().decode().strip()
    run.kill()  # no teardown ran
    run.wait()
    assert ns in netns._namespaces()
    deadline = time.monotonic() + 10
    while netns._alive(run.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    removed = netns.sweep()
    assert ns in removed and f"tb{run.pid}" in removed
    assert ns not in netns._namespaces()
    assert not [ln for ln in netns._links() if ln.startswith((f"tb{run.pid}", f"tv{run.pid}-"))]
