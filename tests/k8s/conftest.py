"""Session fixtures for the Kubernetes tests: one real kube-apiserver, the chart installed.

The binaries are built (``scripts/k8s-binaries``, once per cache directory) after collection and
before the first test, so a cold build on a clean machine is not cut short by a test's timeout;
only when a Kubernetes test is selected.
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

HERE = Path(__file__).resolve().parent
_BIN_DIR = pytest.StashKey[Path | K8sUnavailable]()


@pytest.hookimpl(trylast=True)  # after -k/-m deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(HERE in Path(str(item.path)).parents for item in items):
        try:
            config.stash[_BIN_DIR] = binaries()
        except K8sUnavailable as e:
            config.stash[_BIN_DIR] = e


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
