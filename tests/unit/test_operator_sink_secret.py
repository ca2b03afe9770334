"""A drainer's sink URL with a password: it comes from a Secret (``sinkURISecret``), the pod
reads it as env, and no ConfigMap (nor any other object the operator writes) holds it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from binlog_operator.configs import SINK_URI_ENV, check_all, check_drainer, drainer_toml
from binlog_operator.manifests import build
from binlog_operator.spec import SecretKey, SpecError, parse, parse_cluster, parse_drainer

ETCD = {"endpoints": ["http://etcd:2379"]}
URL = "mysql://binlog:s3cr%40t@db.data.svc:3306/?consistent=true&worker-count=4"


def spec(**drainer: Any) -> dict[str, Any]:
    return {"etcd": ETCD, "drainers": [{"name": "down", **drainer}]}


def objects(raw: dict[str, Any]) -> dict[tuple[str, str], Any]:
    built = build("c1", "ns1", "uid-1", parse(raw), 3)
    return {(o["kind"], o["metadata"]["name"]): o for o in built}


def test_the_secret_reference_parses_with_its_default_key() -> None:
    (d,) = parse(spec(sinkURISecret={"name": "down-sink"})).drainers
    assert d.sink_secret == SecretKey("down-sink", "sink-uri") and d.sink_uri == ""
    (d,) = parse(spec(sinkURISecret={"name": "db", "key": "url"})).drainers
    assert d.sink_secret == SecretKey("db", "url")
    assert parse_drainer({"sinkURISecret": {"name": "db"}}, "x").sink_secret == SecretKey(
        "db", "sink-uri"
    )


def test_the_pod_reads_the_url_from_the_secret_and_the_config_map_has_none() -> None:
    raw = spec(sinkURISecret={"name": "down-sink"}, config={"syncer": {"txn-batch": 5}})
    objs = objects(raw)
    cm = objs[("ConfigMap", "c1-drainer-down")]["data"]["drainer.toml"]
    assert "sink-uri" not in cm and "mysql" not in cm
    pod = objs[("StatefulSet", "c1-drainer-down")]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env[SINK_URI_ENV] == {
        "name": SINK_URI_ENV,
        "valueFrom": {"secretKeyRef": {"name": "down-sink", "key": "sink-uri"}},
    }
    check_all(parse(raw), "c1", "ns1")
    # the drainer, loading the ConfigMap with that env as its pod does, writes to the URL
    config = check_drainer(cm, "down", {SINK_URI_ENV: URL})
    assert config.syncer.sink_url("/data") == URL
    assert config.syncer.txn_batch == 5
    # nothing the operator writes holds a password
    assert all("s3cr" not in json.dumps(o) for o in objs.values())


def test_without_a_secret_the_sink_uri_stays_in_the_config_map() -> None:
    objs = objects(spec(sinkURI="mysql://binlog@db:3306/?consistent=true"))
    cm = objs[("ConfigMap", "c1-drainer-down")]["data"]["drainer.toml"]
    assert 'sink-uri = "mysql://binlog@db:3306/?consistent=true"' in cm
    pod = objs[("StatefulSet", "c1-drainer-down")]["spec"]["template"]["spec"]
    assert all(e["name"] != SINK_URI_ENV for e in pod["containers"][0]["env"])


def test_a_password_in_sink_uri_is_refused_naming_sink_uri_secret() -> None:
    with pytest.raises(SpecError) as caught:
        parse(spec(sinkURI=URL))
    assert caught.value.problems == [
        "drainers[0].sinkURI: a URL with a password would be stored in the ConfigMap; put the "
        "whole URL in a Secret and name it in sinkURISecret ({name, key}) instead"
    ]
    assert "s3cr" not in str(caught.value)
    # a user without a password is no secret
    assert parse(spec(sinkURI="mysql://binlog@db:3306/")).drainers[0].sink_uri


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {"sinkURI": "file:///x", "sinkURISecret": {"name": "s"}},
            "drainers[0]: sinkURI and sinkURISecret name the sink twice; give one of them",
        ),
        (
            {"sinkURISecret": {"name": "s"}, "kafka": {"brokers": ["k:9092"]}},
            "drainers[0]: sinkURISecret and kafka name the sink twice; give one of them",
        ),
        ({"sinkURISecret": {"name": "Not_A_Name"}}, "drainers[0].sinkURISecret.name"),
        ({"sinkURISecret": {"name": "s", "key": "a/b"}}, "drainers[0].sinkURISecret.key"),
    ],
)
def test_a_bad_secret_reference_is_a_spec_error(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse(spec(**fields))
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_config_may_not_set_the_sink_uri_the_secret_gives() -> None:
    parsed = parse(spec(sinkURISecret={"name": "s"}, config={"syncer": {"sink-uri": "print://"}}))
    with pytest.raises(SpecError) as caught:
        drainer_toml(parsed, parsed.drainers[0], "c1", "ns1")
    assert caught.value.problems == [
        "drainers[down].config.syncer.sink-uri: set by drainers[down].sinkURISecret"
    ]


def test_the_drainer_made_of_an_entry_with_a_password_does_not_carry_it() -> None:
    _, entries = parse_cluster(spec(sinkURI=URL))
    (entry,) = entries
    assert "s3cr" not in json.dumps(entry)
    assert entry["sinkURI"].startswith("mysql://binlog:******@db.data.svc:3306/")
    with pytest.raises(SpecError, match="a URL with a password"):
        parse_drainer(entry, "down")  # still refused, on its Drainer
