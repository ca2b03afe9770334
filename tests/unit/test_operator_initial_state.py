"""A drainer's ``initialState``: the ConfigMap key mounted in its pod and named by its config."""

from __future__ import annotations

from typing import Any

import pytest

from binlog_operator.configs import check_all, drainer_toml
from binlog_operator.manifests import build
from binlog_operator.spec import SpecError, parse

RAW: dict[str, Any] = {
    "etcd": {"endpoints": ["http://etcd-0:2379"]},
    "pumps": {"replicas": 0},
    "drainers": [
        {
            "name": "down",
            "sinkURI": "mysql://drainer@10.0.0.5:3306/",
            "initialState": {"name": "down-state"},
        }
    ],
}


def test_the_config_map_key_is_mounted_and_named_as_initial_state() -> None:
    spec = parse(RAW)
    check_all(spec, "restored", "ns2")
    text = drainer_toml(spec, spec.drainers[0], "restored", "ns2")
    assert 'initial-state = "/etc/binlog/initial-state/drainer-state.json"' in text
    sts = next(o for o in build("restored", "ns2", "uid", spec, 0) if o["kind"] == "StatefulSet"
               and o["metadata"]["name"] == "restored-drainer-down")  # fmt: skip
    pod = sts["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "initial-state")
    assert volume["configMap"] == {
        "name": "down-state",
        "items": [{"key": "drainer-state.json", "path": "drainer-state.json"}],
    }
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "initial-state")
    assert mount == {"name": "initial-state", "mountPath": "/etc/binlog/initial-state",
                     "readOnly": True}  # fmt: skip


def test_initial_state_in_config_as_well_is_refused() -> None:
    raw = {**RAW, "drainers": [{**RAW["drainers"][0], "config": {"initial-state": "/x.json"}}]}
    spec = parse(raw)
    with pytest.raises(SpecError, match=r"config\.initial-state: set by drainers\[down\]"):
        drainer_toml(spec, spec.drainers[0], "restored", "ns2")


def test_a_bad_reference_is_reported() -> None:
    raw = {**RAW, "drainers": [{**RAW["drainers"][0], "initialState": {"name": "Bad_Name"}}]}
    with pytest.raises(SpecError, match=r"initialState\.name: 'Bad_Name'"):
        parse(raw)
