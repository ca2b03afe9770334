"""Manifest building: the objects of a BinlogCluster, and configs the services accept."""

from __future__ import annotations

from typing import Any

import pytest

from binlog_operator.configs import check_all, check_drainer, check_pump, drainer_toml, pump_toml
from binlog_operator.manifests import build, pump_selector
from binlog_operator.spec import SpecError, parse
from services.capture.config import CaptureConfig
from tributary.settings import load

RAW: dict[str, Any] = {
    "etcd": {"endpoints": ["http://etcd-0:2379", "http://etcd-1:2379"]},
    "image": "tributary:test",
    "pumps": {
        "replicas": 3,
        "storage": {"size": "5Gi", "storageClassName": "fast"},
        "config": {"gc": 3, "storage": {"sync-log": False}},
    },
    "drainers": [
        {
            "name": "down",
            "sinkURI": "sqlite:///var/lib/binlog/down.db",
            "config": {"syncer": {"worker-count": 4}},
        }
    ],
    "captures": {"replicas": 2, "upstreamSecret": {"name": "upstream-db"}},
}


def objects(raw: dict[str, Any] = RAW, pump_replicas: int = 3) -> dict[tuple[str, str], Any]:
    built = build("c1", "ns1", "uid-1", parse(raw), pump_replicas)
    return {(o["kind"], o["metadata"]["name"]): o for o in built}


def test_every_component_gets_a_config_a_headless_service_and_a_stateful_set() -> None:
    objs = objects()
    assert sorted(objs) == [
        ("ConfigMap", "c1-drainer-down"),
        ("ConfigMap", "c1-pump"),
        ("Service", "c1-capture"),
        ("Service", "c1-drainer-down"),
        ("Service", "c1-pump"),
        ("StatefulSet", "c1-capture"),
        ("StatefulSet", "c1-drainer-down"),
        ("StatefulSet", "c1-pump"),
    ]
    for o in objs.values():
        assert o["metadata"]["namespace"] == "ns1"
        (owner,) = o["metadata"]["ownerReferences"]
        assert owner["uid"] == "uid-1" and owner["kind"] == "BinlogCluster" and owner["controller"]
        assert o["metadata"]["labels"]["app.kubernetes.io/instance"] == "c1"
    for (kind, _), o in objs.items():
        if kind == "Service":
            assert o["spec"]["clusterIP"] == "None"


def test_the_pump_stateful_set_runs_pumps_named_after_their_pods() -> None:
    sts = objects(pump_replicas=5)[("StatefulSet", "c1-pump")]
    assert sts["spec"]["replicas"] == 5  # the caller's value, not the spec's 3
    assert sts["spec"]["serviceName"] == "c1-pump"
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "tributary:test" and c["command"] == ["binlog-pump"]
    args = c["args"]
    assert args[args.index("--node-id") + 1] == "$(POD_NAME)"
    assert args[args.index("--advertise-addr") + 1] == "$(POD_NAME).c1-pump.$(NAMESPACE).svc:8250"
    assert {e["name"] for e in c["env"]} == {"POD_NAME", "NAMESPACE"}
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations["prometheus.io/scrape"] == "true"
        and annotations["prometheus.io/port"] == "8250"  # gRPC and HTTP share it
    )
    assert c["readinessProbe"]["httpGet"]["port"] == "grpc"
    assert [p["containerPort"] for p in c["ports"]] == [8250]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    assert sts["spec"]["selector"]["matchLabels"] == sts["spec"]["template"]["metadata"]["labels"]
    # a scaled-away (offline) pump's volume goes with it; deleting the StatefulSet keeps them
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Delete",
    }
    drainer = objects()[("StatefulSet", "c1-drainer-down")]
    assert "persistentVolumeClaimRetentionPolicy" not in drainer["spec"]


def test_the_pump_selector_matches_the_pump_pods() -> None:
    labels = objects()[("StatefulSet", "c1-pump")]["spec"]["template"]["metadata"]["labels"]
    for pair in pump_selector("c1").split(","):
        k, v = pair.split("=")
        assert labels[k] == v


def test_captures_run_the_cdc_server_against_the_etcd_endpoints_and_cluster_id() -> None:
    sts = objects()[("StatefulSet", "c1-capture")]
    assert sts["spec"]["replicas"] == 2
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["binlog-cdc"]
    assert c["args"] == [
        "server",
        "--pd",
        "http://etcd-0:2379,http://etcd-1:2379",
        "--addr",
        "0.0.0.0:8300",
        "--cluster-id",
        "default",  # where the operator reads changefeeds from (configs.CAPTURE_CLUSTER_ID)
        "--advertise-addr",
        "$(POD_NAME).c1-capture.$(NAMESPACE).svc:8300",
    ]
    # the upstream URL holds a password: it comes from the named Secret key, never the spec
    upstream = [e for e in c["env"] if e["name"] == "CDC_UPSTREAM"]
    assert upstream == [
        {
            "name": "CDC_UPSTREAM",
            "valueFrom": {"secretKeyRef": {"name": "upstream-db", "key": "upstream"}},
        }
    ]


def expand(arg: str, **env: str) -> str:
    """``$(VAR)`` references in a container arg, as the kubelet expands them."""
    for k, v in env.items():
        arg = arg.replace(f"$({k})", v)
    return arg


def test_the_rendered_capture_command_loads_with_the_capture_settings() -> None:
    (c,) = objects()[("StatefulSet", "c1-capture")]["spec"]["template"]["spec"]["containers"]
    args = [
        a.replace("$(POD_NAME)", "c1-capture-0").replace("$(NAMESPACE)", "ns1") for a in c["args"]
    ]
    cfg = load(CaptureConfig, args[1:], {"CDC_UPSTREAM": "mysql://cdc:pw@db:3306/"}, "CDC")
    assert cfg.upstream == "mysql://cdc:pw@db:3306/" and cfg.cluster_id == "default"
    assert cfg.listen.advertise == "c1-capture-0.c1-capture.ns1.svc:8300"


def test_rendered_pump_toml_loads_with_the_pump_settings() -> None:
    text = objects()[("ConfigMap", "c1-pump")]["data"]["pump.toml"]
    cfg = check_pump(text)
    assert cfg.pd_urls == ("http://etcd-0:2379", "http://etcd-1:2379")
    assert cfg.listen.addr == "0.0.0.0:8250" and cfg.status_addr == ""  # HTTP on 8250 too
    assert cfg.data_dir == "/var/lib/binlog/pump"
    assert cfg.gc == 3 * 86400 and cfg.storage.sync_log is False  # the user's keys


def test_rendered_drainer_toml_loads_with_the_drainer_settings() -> None:
    text = objects()[("ConfigMap", "c1-drainer-down")]["data"]["drainer.toml"]
    cfg = check_drainer(text, "down")
    assert cfg.syncer.sink_uri == "sqlite:///var/lib/binlog/down.db"
    assert cfg.syncer.worker_count == 4
    assert cfg.pd_urls == ("http://etcd-0:2379", "http://etcd-1:2379")


def test_a_managed_key_in_the_user_config_is_refused() -> None:
    raw = {**RAW, "pumps": {"config": {"data-dir": "/elsewhere", "pd-urls": "http://x:1"}}}
    with pytest.raises(SpecError) as caught:
        pump_toml(parse(raw))
    assert caught.value.problems == [
        "pumps.config.data-dir: managed by the operator (the data is on the pod's volume at "
        "/var/lib/binlog: it cannot move in place), remove it",
        "pumps.config.pd-urls: managed by the operator (spec.etcd.endpoints), remove it",
    ]


def test_a_config_the_service_would_refuse_is_a_spec_error() -> None:
    raw = {**RAW, "pumps": {"config": {"heartbeat-interval": "soon"}}}
    with pytest.raises(SpecError, match="heartbeat-interval"):
        check_pump(pump_toml(parse(raw)))
    drainer = {
        **RAW,
        "drainers": [{"name": "d", "sinkURI": "x://", "config": {"syncer": {"worker-count": 0}}}],
    }
    spec = parse(drainer)
    with pytest.raises(SpecError, match="worker-count"):
        check_drainer(drainer_toml(spec, spec.drainers[0], "c1", "ns1"), "d")


def test_a_tls_cluster_passes_the_check_though_its_files_exist_only_in_the_pods() -> None:
    spec = parse({**RAW, "tls": {"secretName": "c1-tls"}})
    check_all(spec, "c1", "ns1")  # the loader requires the files to exist: the check uses stand-ins
    for text in (pump_toml(spec), drainer_toml(spec, spec.drainers[0], "c1", "ns1")):
        assert 'ssl-ca = "/etc/binlog/tls/ca.crt"' in text
        assert 'ssl-cert = "/etc/binlog/tls/tls.crt"' in text
        assert 'ssl-key = "/etc/binlog/tls/tls.key"' in text
    bad = parse({**RAW, "tls": {"secretName": "c1-tls"}, "pumps": {"config": {"gc": "x"}}})
    with pytest.raises(SpecError, match="gc") as caught:
        check_all(bad, "c1", "ns1")
    assert not any("ssl" in p for p in caught.value.problems)


def test_a_config_edit_changes_the_pod_template_hash() -> None:
    before = objects()[("StatefulSet", "c1-pump")]["spec"]["template"]["metadata"]
    edited = {**RAW, "pumps": {**RAW["pumps"], "config": {"gc": 5}}}
    after = objects(edited)[("StatefulSet", "c1-pump")]["spec"]["template"]["metadata"]
    key = "binlog.io/config-hash"
    assert before["annotations"][key] != after["annotations"][key]


def test_tls_mounts_the_secret_and_points_the_configs_at_it() -> None:
    objs = objects({**RAW, "tls": {"secretName": "binlog-tls"}})
    pod = objs[("StatefulSet", "c1-pump")]["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": "binlog-tls"}} in pod["volumes"]
    text = objs[("ConfigMap", "c1-pump")]["data"]["pump.toml"]
    assert 'ssl-cert = "/etc/binlog/tls/tls.crt"' in text


def test_with_tls_every_component_probes_itself_with_the_certificates() -> None:
    """The kubelet's httpGet presents no client certificate, which the TLS APIs require."""
    objs = objects({**RAW, "tls": {"secretName": "binlog-tls"}})
    for sts, port in [("c1-pump", 8250), ("c1-drainer-down", 8249), ("c1-capture", 8300)]:
        tmpl = objs[("StatefulSet", sts)]["spec"]["template"]
        (c,) = tmpl["spec"]["containers"]
        assert c["readinessProbe"]["exec"]["command"] == [
            *("python", "-m", "tributary.servicekit.probe"),
            f"https://127.0.0.1:{port}/ready",
            *("--tls-dir", "/etc/binlog/tls"),
        ]
        assert c["livenessProbe"]["exec"]["command"][3] == f"https://127.0.0.1:{port}/health"
        assert tmpl["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
    (c,) = objs[("StatefulSet", "c1-capture")]["spec"]["template"]["spec"]["containers"]
    tls_args = c["args"][c["args"].index("--security-ssl-ca") :]
    assert tls_args == [
        *("--security-ssl-ca", "/etc/binlog/tls/ca.crt"),
        *("--security-ssl-cert", "/etc/binlog/tls/tls.crt"),
        *("--security-ssl-key", "/etc/binlog/tls/tls.key"),
    ]
    plain = objects()[("StatefulSet", "c1-pump")]["spec"]["template"]["spec"]["containers"][0]
    assert plain["livenessProbe"]["httpGet"] == {"path": "/health", "port": "grpc"}


def test_the_tls_secret_is_mounted_whole_so_a_rotation_reaches_the_running_pods() -> None:
    """The kubelet updates a Secret volume in place, but never a ``subPath`` mount of one; the
    processes reload the files (``telemetry.tlsreload``), so nothing of the Secret's content is
    in the pod template and a rotation replaces no pod."""
    objs = objects({**RAW, "tls": {"secretName": "binlog-tls"}})
    for sts in ("c1-pump", "c1-drainer-down", "c1-capture"):
        tmpl = objs[("StatefulSet", sts)]["spec"]["template"]
        (c,) = tmpl["spec"]["containers"]
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "tls"]
        assert mount == {"name": "tls", "mountPath": "/etc/binlog/tls", "readOnly": True}
