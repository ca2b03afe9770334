"""A declared changefeed into the storage sink: ``storageVolumeClaim`` names the claim holding
its directory, the sink URL must be a directory of that claim and carries options the capture
accepts, and the capture pods mount the claim there, writable; every misuse is listed at once."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from binlog_operator import crd
from binlog_operator.feedspec import STORAGE_DIR, parse_feeds, sink_uri, storage_dir
from binlog_operator.feedsync import FeedError, FeedSync
from binlog_operator.manifests import build
from binlog_operator.spec import SpecError, parse
from tributary.image import IMAGE_UID
from tributary.sinks.storage.settings import parse_url

ETCD = {"endpoints": ["http://etcd-0:2379"]}
UPSTREAM = {"name": "upstream", "key": "url"}
URI = f"file://{STORAGE_DIR}/cdc-files/orders?protocol=csv&csv.include-commit-ts=true"


def _spec(feeds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "etcd": ETCD,
        "captures": {"replicas": 2, "upstreamSecret": UPSTREAM, "changefeeds": feeds},
    }


def test_a_storage_changefeed_keeps_its_url_and_claim() -> None:
    problems: list[str] = []
    (f,) = parse_feeds(
        [{"id": "to-files", "sinkURI": URI, "storageVolumeClaim": "cdc-files"}], problems
    )
    assert problems == []
    assert f.storage_claim == "cdc-files" and sink_uri(f) == URI
    settings = parse_url(urlsplit(sink_uri(f)))  # what the capture makes of it
    assert settings.directory == f"{STORAGE_DIR}/cdc-files/orders"
    assert settings.directory.startswith(storage_dir("cdc-files"))


def test_the_capture_pods_mount_each_storage_claim_once_writable() -> None:
    other = f"file://{STORAGE_DIR}/audit?protocol=canal-json&enable-tidb-extension=true"
    feeds = [
        {"id": "a", "sinkURI": URI, "storageVolumeClaim": "cdc-files"},
        {"id": "b", "sinkURI": URI.replace("orders", "items"), "storageVolumeClaim": "cdc-files"},
        {"id": "c", "sinkURI": other, "storageVolumeClaim": "audit"},
    ]
    built = {
        (o["kind"], o["metadata"]["name"]): o
        for o in build("c1", "ns", "u", parse(_spec(feeds)), 1)
    }
    pod = built[("StatefulSet", "c1-capture")]["spec"]["template"]["spec"]
    volumes = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert [v["persistentVolumeClaim"]["claimName"] for v in volumes] == ["audit", "cdc-files"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert [mounts[v["name"]]["mountPath"] for v in volumes] == [
        f"{STORAGE_DIR}/audit",
        f"{STORAGE_DIR}/cdc-files",
    ]
    assert not any(mounts[v["name"]].get("readOnly") for v in volumes)
    assert pod["securityContext"] == {"fsGroup": IMAGE_UID}


@pytest.mark.parametrize(
    ("feed", "problem"),
    [
        (
            {"sinkURI": URI, "storageVolumeClaim": "Bad_Name"},
            "storageVolumeClaim: 'Bad_Name' is not a PersistentVolumeClaim name",
        ),
        (
            {"sinkURI": "mysql://cdc@db:3306/", "storageVolumeClaim": "cdc-files"},
            "storageVolumeClaim: only with a storage sink",
        ),
        (
            {"sinkURI": f"file://{STORAGE_DIR}/cdc-files", "storageVolumeClaim": "cdc-files"},
            "storageVolumeClaim: only with a storage sink",  # no protocol: the binlog file sink
        ),
        (
            {"sinkURI": "file:///data/cdc?protocol=csv", "storageVolumeClaim": "cdc-files"},
            f"must be file://{STORAGE_DIR}/cdc-files or a directory under it",
        ),
        (
            {
                "sinkURI": f"file://{STORAGE_DIR}/cdc-files2?protocol=csv",
                "storageVolumeClaim": "cdc-files",
            },
            f"must be file://{STORAGE_DIR}/cdc-files or a directory under it",
        ),
        (
            {"sinkURI": URI + "&date-separator=hour", "storageVolumeClaim": "cdc-files"},
            "date-separator must be one of none, year, month, day",
        ),
    ],
)
def test_misuses_are_named(feed: dict[str, Any], problem: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(_spec([{"id": "f", **feed}]))
    assert any(problem in p for p in e.value.problems), e.value.problems


def test_the_crd_takes_the_claim() -> None:
    assert "storageVolumeClaim" in crd.CHANGEFEED_ITEM["properties"]


class _Claims:
    """What FeedSync asks of the API server here: one GET per object (a fake of our client)."""

    def __init__(self, claims: set[str]) -> None:
        self.claims = claims

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> Any:
        return {"metadata": {"name": name}} if name in self.claims else None


async def test_a_missing_storage_claim_is_the_changefeeds_error() -> None:
    problems: list[str] = []
    (f,) = parse_feeds(
        [{"id": "to-files", "sinkURI": URI, "storageVolumeClaim": "cdc-files"}], problems
    )
    kube = _Claims(set())
    sync = FeedSync(kube, None, None, None, 1.0)  # type: ignore[arg-type]
    with pytest.raises(FeedError, match=r"ns/cdc-files \(storageVolumeClaim\) does not exist"):
        await sync._uri("ns", f, {})
    kube.claims.add("cdc-files")
    assert await sync._uri("ns", f, {}) == URI
