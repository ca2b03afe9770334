"""One contract for the storage sink's ``Store`` port, run against every implementation: the
directory (``Files``, ``file://``) and the S3 bucket prefix (``S3Store``, ``s3://``) on a real
S3-compatible server (SeaweedFS, ``tests.support.seaweedfs``), one server for the module, a
prefix per test.

Every store: ``create`` writes a new file and refuses a taken name without touching it (also
when two threads race for the name: exactly one wins); ``replace`` changes a file; ``read`` and
``size`` answer None for a missing file; ``list_names`` lists the files directly in a directory;
``walk`` lists every file as a relative path, never a temporary one; ``next_index`` follows
``meta/CDC.index`` and the directory. The S3 store refuses to open without the bucket or with
wrong keys, naming the location.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tributary.sinks.storage.settings import parse_url
from tributary.sinks.storage.store import Store, StoreError, next_index, open_store

if TYPE_CHECKING:  # imported when the server starts: test_capture_storage registers the module
    from tests.support.seaweedfs import SeaweedFS  # as a plugin, which must import it first

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

D = PurePosixPath("shop/items/100/2026-05-04")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    from tests.support.seaweedfs import run_seaweedfs

    with run_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as s:
        yield s


def _s3_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    server: SeaweedFS = request.getfixturevalue("server")  # started only for the S3 cases
    return server.uri(f"t-{uuid.uuid4().hex[:8]}/cdc", "protocol=csv")


def _file_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"file://{tmp_path}/cdc?protocol=csv"


URLS: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {"file": _file_url, "s3": _s3_url}


@pytest.fixture(params=sorted(URLS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    s = open_store(parse_url(urlsplit(URLS[request.param](request, tmp_path))))
    s.open()
    return s


def test_create_never_replaces(store: Store) -> None:
    assert store.create(D / "CDC000001.csv", b"first")
    assert not store.create(D / "CDC000001.csv", b"second")
    assert store.read(D / "CDC000001.csv") == b"first"
    assert store.size(D / "CDC000001.csv") == 5


def test_racing_creates_one_wins(store: Store) -> None:
    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: store.create(D / "CDC000002.csv", b"%d" % i), range(8)))
    assert won.count(True) == 1
    assert store.read(D / "CDC000002.csv") == b"%d" % won.index(True)


def test_replace_read_size_and_missing(store: Store) -> None:
    store.replace(PurePosixPath("metadata"), b'{"checkpoint-ts":1}')
    store.replace(PurePosixPath("metadata"), b'{"checkpoint-ts":22}')
    assert store.read(PurePosixPath("metadata")) == b'{"checkpoint-ts":22}'
    assert store.read(PurePosixPath("nothing/here")) is None
    assert store.size(PurePosixPath("nothing/here")) is None


def test_list_names_and_walk(store: Store) -> None:
    assert store.walk() == [] and store.list_names(D) == []
    store.create(D / "CDC000001.csv", b"a")
    store.create(D / "CDC000002.csv", b"")
    store.replace(D / "meta/CDC.index", b"CDC000002.csv\n")
    store.create(PurePosixPath("shop/items/meta/schema_100_0000000001.json"), b"{}")
    assert sorted(store.list_names(D)) == ["CDC000001.csv", "CDC000002.csv"]
    assert store.list_names(D / "meta") == ["CDC.index"]
    assert sorted(store.walk()) == [
        f"{D}/CDC000001.csv",
        f"{D}/CDC000002.csv",
        f"{D}/meta/CDC.index",
        "shop/items/meta/schema_100_0000000001.json",
    ]  # nothing of .tmp/ (the S3 store's probe, the directory's temporary files)


def test_next_index_follows_the_index_file_and_the_directory(store: Store) -> None:
    assert next_index(store, D, ".csv") == 1
    store.replace(D / "meta/CDC.index", b"CDC000005.csv\n")
    assert next_index(store, D, ".csv") == 5  # named but never written: that number again
    assert store.create(D / "CDC000005.csv", b"x")
    assert next_index(store, D, ".csv") == 6
    assert store.create(D / "CDC000009.csv", b"y")  # a file the index does not name
    assert next_index(store, D, ".csv") == 10


def test_s3_refuses_a_missing_bucket_and_wrong_keys(server: SeaweedFS) -> None:
    missing = open_store(parse_url(urlsplit(server.uri("p", "protocol=csv", bucket="nope"))))
    with pytest.raises(StoreError, match="s3://nope/p"):
        missing.open()
    wrong = server.uri("p", "protocol=csv").replace("secret-access-key=", "secret-access-key=x")
    with pytest.raises(StoreError, match="s3://cdc/p"):
        open_store(parse_url(urlsplit(wrong))).open()
