"""Session fixtures for the Kubernetes tests: one real kube-apiserver, the chart installed; and
the one-node cluster whose pods really run (``kube_node``, scripts/k8s-node) with the product image.

The binaries are built (``scripts/k8s-binaries``, once per cache directory) after collection and
before the first test, so a cold build on a clean machine is not cut short by a test's timeout;
only when a Kubernetes test is selected. Likewise the node's binaries and the product image
(``tests.support.k8snode.prepare``), only when a test using ``kube_node`` is selected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.k8s import (
    InstalledChart,
    K8sUnavailable,
    KubeApiServer,
    binaries,
    install_chart,
    run_apiserver,
)
from tests.support.k8snode import KubeNode, Prepared, prepare, run_node

HERE = Path(__file__).resolve().parent
_BIN_DIR = pytest.StashKey[Path | K8sUnavailable]()
_NODE = pytest.StashKey[Prepared | K8sUnavailable]()


@pytest.hookimpl(trylast=True)  # after -k/-m deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(HERE in Path(str(item.path)).parents for item in items):
        try:
            config.stash[_BIN_DIR] = binaries()
        except K8sUnavailable as e:
            config.stash[_BIN_DIR] = e
    if any("kube_node" in getattr(item, "fixturenames", ()) for item in items):
        try:
            config.stash[_NODE] = prepare()
        except K8sUnavailable as e:
            config.stash[_NODE] = e


@pytest.fixture(scope="session")
def kube(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[KubeApiServer]:
    """One real API server for the session (skipped, with the reason, without binaries)."""
    bin_dir = pytestconfig.stash.get(_BIN_DIR, None)
    if bin_dir is None:
        bin_dir = binaries()
    if isinstance(bin_dir, K8sUnavailable):
        pytest.skip(str(bin_dir))
    with run_apiserver(tmp_path_factory.mktemp("kube"), bin_dir) as server:
        yield server


@pytest.fixture(scope="session")
def binlog_chart(kube: KubeApiServer) -> InstalledChart:
    """The chart installed with ``helm install`` (CRDs, RBAC, the operator Deployment)."""
    return install_chart(kube)


@pytest.fixture(scope="session")
def kube_node(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[KubeNode]:
    """The one-node cluster (scripts/k8s-node) with the product image imported; taken down at
    the end of the session (skipped, with the reason, where it cannot run)."""
    prepared = pytestconfig.stash.get(_NODE, None)
    if prepared is None:
        prepared = prepare()
    if isinstance(prepared, K8sUnavailable):
        pytest.skip(str(prepared))
    with run_node(prepared, tmp_path_factory.mktemp("node")) as node:
        yield node
