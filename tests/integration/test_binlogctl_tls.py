"""binlogctl pausing a pump whose HTTP API requires mutual TLS and allowed client CNs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.binlogctl.cli import main
from tests.support.certs import make_pki
from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState


async def test_pause_pump_over_mutual_tls(
    tmp_path: Path, etcd: EtcdProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    pki = make_pki(tmp_path / "pki", clients=("binlogctl", "intruder"))
    cfg = pump_config(
        tmp_path / "p", etcd.endpoint, security=pki.server_security(allowed_cn=("binlogctl",))
    )
    async with running_pump(cfg) as p:
        node = p.started.node_id
        base = (
            "pause-pump", "--node-id", node, "--pd-urls", etcd.endpoint,
            "--status-addr", f"127.0.0.1:{p.started.http_port}",
        )  # fmt: skip

        def tls(name: str) -> tuple[str, ...]:
            leaf = pki.clients[name]
            return (
                "--ssl-ca",
                str(pki.ca.cert),
                "--ssl-cert",
                str(leaf.cert),
                "--ssl-key",
                str(leaf.key),
            )

        assert await asyncio.to_thread(main, base) == 1  # plain HTTP to a TLS port
        assert f"cannot reach pump {node} at http://127.0.0.1:" in capsys.readouterr().err
        assert await asyncio.to_thread(main, (*base, *tls("intruder"))) == 1
        err = capsys.readouterr().err
        assert f"pump {node} answered HTTP 403 at https://127.0.0.1:" in err
        assert "client certificate CN not allowed (intruder)" in err
        assert not p.task.done()

        assert await asyncio.to_thread(main, (*base, *tls("binlogctl"))) == 0
        assert f"pump {node} is paused" in capsys.readouterr().out
        assert await asyncio.wait_for(asyncio.shield(p.task), 60) is NodeState.PAUSED
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        status = await NodeRegistry(kv).get(NodeKind.PUMP, node)
    assert status is not None and status.state is NodeState.PAUSED
