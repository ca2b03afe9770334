"""Operator options from the environment, and pump address resolution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from binlog_operator.options import Options, from_env
from binlog_operator.pumps import AddressFile, ClusterDns, addresses_from_env
from binlog_operator.scaledown import ScaleDownError


def test_defaults_and_overrides() -> None:
    assert from_env({}) == Options()
    opts = from_env({"BINLOG_OPERATOR_IMAGE": "r/t:2", "BINLOG_OPERATOR_OFFLINE_TIMEOUT": "30"})
    assert opts.image == "r/t:2" and opts.offline_timeout == 30.0


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="BINLOG_OPERATOR_STATUS_INTERVAL"):
        from_env({"BINLOG_OPERATOR_STATUS_INTERVAL": "0"})


def test_in_cluster_a_pump_is_reached_by_its_pod_dns_name() -> None:
    assert addresses_from_env({}) == ClusterDns()
    url = ClusterDns().http_url("ns1", "c1", "c1-pump-2")
    assert url == "http://c1-pump-2.c1-pump.ns1.svc:8251"


def test_an_address_file_maps_pods_and_is_reread(tmp_path: Path) -> None:
    path = tmp_path / "pumps.json"
    addresses = addresses_from_env({"BINLOG_OPERATOR_PUMP_ADDRESS_FILE": str(path)})
    assert addresses == AddressFile(path)
    with pytest.raises(ScaleDownError, match="cannot read"):
        addresses.http_url("ns1", "c1", "c1-pump-0")
    path.write_text(json.dumps({"ns1/c1-pump-0": "127.0.0.1:9001"}))
    assert addresses.http_url("ns1", "c1", "c1-pump-0") == "http://127.0.0.1:9001"
    with pytest.raises(ScaleDownError, match="no address for pump ns1/c1-pump-1"):
        addresses.http_url("ns1", "c1", "c1-pump-1")
