"""Session fixtures for the Kubernetes tests: one real kube-apiserver, the chart installed; and
the one-node cluster whose pods really run (``kube_node``, scripts/k8s-node) with the product image.

Everything they run is prepared by ``make deps`` beforehand; the fixtures only look it up and a
missing piece fails the first test that needs it, with "NAME is missing: run `make deps`".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.k8s import (
    InstalledChart,
    K8sUnavailable,
    KubeApiServer,
    binaries,
    install_chart,
    run_apiserver,
)
from tests.support.k8snode import KubeNode, prepare, run_node


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApiServer]:
    """One real API server for the session."""
    with run_apiserver(tmp_path_factory.mktemp("kube"), binaries()) as server:
        yield server


@pytest.fixture(scope="session")
def binlog_chart(kube: KubeApiServer) -> InstalledChart:
    """The chart installed with ``helm install`` (CRDs, RBAC, the operator Deployment)."""
    return install_chart(kube)


@pytest.fixture(scope="session")
def kube_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeNode]:
    """The one-node cluster (scripts/k8s-node) with the product image imported; taken down at
    the end of the session (skipped, with the reason, where it cannot run: not root)."""
    try:
        prepared = prepare()
    except K8sUnavailable as e:
        pytest.skip(str(e))
    with run_node(prepared, tmp_path_factory.mktemp("node")) as node:
        yield node
