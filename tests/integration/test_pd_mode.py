"""PD mode with real processes: a pump, binlogctl and a drainer whose pd-urls answer pdpb.PD
take the cluster ID and their timestamps from it, and run no TSO of their own.

The PD here is a binlog-tso process: it answers GetMembers and Tso and serves etcd's API on
the same port, as PD's client port does (a real PD is not available to the tests)."""

from __future__ import annotations

import asyncio
import dataclasses
import tomllib
from pathlib import Path

import pytest

from services.binlogctl.cli import main as binlogctl
from services.drainer.app import Started as DrainerStarted
from services.drainer.app import serve as serve_drainer
from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.tso import members_up, tso_process
from tributary.config.drainer import DrainerConfig
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind
from tributary.settings import ListenSettings
from tributary.tso.pd_client import PdClient, get_members

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(300)]


async def test_pump_binlogctl_drainer_take_cluster_id_and_timestamps_from_pd(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    with tso_process(etcd.endpoint, tmp_path / "tso.log") as (pd_url, _):
        await members_up(pd_url, 1)
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            pd_cluster_id = await read_cluster_id(kv)
        assert pd_cluster_id is not None

        async with running_pump(pump_config(tmp_path / "pump", pd_url)) as pump:
            assert pump.started.cluster_id == pd_cluster_id
            # PD is the one clock: the pump campaigns for no TSO leadership of its own
            assert len((await get_members(pd_url)).members) == 1
            async with EtcdKv.connect([etcd.endpoint]) as kv:  # registered in PD's etcd
                pumps = await NodeRegistry(kv).list(NodeKind.PUMP)
            assert [p.node_id for p in pumps] == [pump.started.node_id]

            async with PdClient([pd_url], pd_cluster_id) as pd:
                before = await pd.get_ts()
            data_dir = tmp_path / "meta"
            argv = ["generate_meta", "--pd-urls", pd_url, "--data-dir", str(data_dir)]
            assert await asyncio.to_thread(binlogctl, argv) == 0
            commit_ts = tomllib.loads((data_dir / "savepoint").read_text())["commitTS"]
            assert commit_ts > before  # from PD's clock, later

            # a drainer with initial-commit-ts = -1 starts at PD's time now
            cfg = dataclasses.replace(
                DrainerConfig(),
                listen=ListenSettings("127.0.0.1:0"),
                data_dir=str(tmp_path / "drainer"),
                pd_urls=(pd_url,),
                initial_commit_ts=-1,
            )
            sink = f"sqlite://{tmp_path / 'down.db'}"
            cfg = dataclasses.replace(cfg, syncer=dataclasses.replace(cfg.syncer, sink_uri=sink))
            stop = asyncio.Event()
            ready: asyncio.Future[DrainerStarted] = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(serve_drainer(cfg, stop, ready.set_result))
            try:
                started = await asyncio.wait_for(asyncio.shield(ready), 60)
                assert started.cluster_id == pd_cluster_id
                assert started.start_ts > commit_ts
                async with EtcdKv.connect([etcd.endpoint]) as kv:
                    (drainer,) = await NodeRegistry(kv).list(NodeKind.DRAINER)
                assert drainer.update_ts >= started.start_ts  # PD's time, not the local one
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)
