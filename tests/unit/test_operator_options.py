"""Operator options from the environment, and pump address resolution."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest

from binlog_operator.options import Options, from_env
from binlog_operator.pumps import AddressFile, ClusterDns, HttpCloser, Target, addresses_from_env
from binlog_operator.scaledown import ScaleDownError

# ``url`` builds the address only; no request is made, so no session is opened
SESSION_UNUSED = cast(aiohttp.ClientSession, cast(Any, None))


def test_defaults_and_overrides() -> None:
    assert from_env({}) == Options()
    opts = from_env({"BINLOG_OPERATOR_IMAGE": "r/t:2", "BINLOG_OPERATOR_OFFLINE_TIMEOUT": "30"})
    assert opts.image == "r/t:2" and opts.offline_timeout == 30.0


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="BINLOG_OPERATOR_STATUS_INTERVAL"):
        from_env({"BINLOG_OPERATOR_STATUS_INTERVAL": "0"})


def test_in_cluster_a_pod_is_reached_by_its_dns_name_over_http_or_https() -> None:
    assert addresses_from_env({}) == ClusterDns()
    pumps = Target("ns1", "c1-pump", 8251)
    closer = HttpCloser(SESSION_UNUSED, ClusterDns(), pumps)
    assert closer.url("c1-pump-2") == "http://c1-pump-2.c1-pump.ns1.svc:8251/state/c1-pump-2/close"
    drainer = Target("ns1", "c1-drainer-d", 8252, tls=ssl.create_default_context())
    closer = HttpCloser(SESSION_UNUSED, ClusterDns(), drainer)
    assert closer.url("c1-drainer-d-0") == (
        "https://c1-drainer-d-0.c1-drainer-d.ns1.svc:8252/state/c1-drainer-d-0/close"
    )


def test_an_address_file_maps_pods_and_is_reread(tmp_path: Path) -> None:
    path = tmp_path / "pumps.json"
    addresses = addresses_from_env({"BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(path)})
    assert addresses == AddressFile(path)
    with pytest.raises(ScaleDownError, match="cannot read"):
        addresses.address("ns1", "c1-pump", "c1-pump-0", 8251)
    path.write_text(json.dumps({"ns1/c1-pump-0": "127.0.0.1:9001"}))
    assert addresses.address("ns1", "c1-pump", "c1-pump-0", 8251) == "127.0.0.1:9001"
    with pytest.raises(ScaleDownError, match="no address for ns1/c1-pump-1"):
        addresses.address("ns1", "c1-pump", "c1-pump-1", 8251)
